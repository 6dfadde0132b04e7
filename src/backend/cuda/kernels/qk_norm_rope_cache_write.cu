#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/qk_norm_rope.cuh"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"

namespace qinfer::cuda {

namespace {

using namespace qk_rope;

constexpr int kWarpsPerBlock = 4;
// From this many tokens on (prefill), a warp handles 8 heads of its token: the 8 loads are in flight together and the
// token's RoPE angles are computed once per warp, not per head. Fewer tokens (decode) keep one head per warp, so that
// a step's few tokens still spread over many warps (docs/CUDA_DESIGN.md, "QK-norm, RoPE and the cache write").
constexpr int kManyTokens = 256;
constexpr int kHeadsPerWarpForManyTokens = 8;

// Warp w handles heads [w' * kHeadsPerWarp, ...) of token w / warps_per_token (w' = w % warps_per_token), over the
// q, k and v heads of the fused projection.
template <int kHeadDim, int kHeadsPerWarp, bool kFp8>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) qk_norm_rope_cache_write_kernel(QkNormRopeCacheWriteParams p) {
  constexpr int kPerLane = kHeadDim / 32;
  using Vector = LaneVector<kHeadDim>;
  allow_dependents();
  wait_for_producer();
  const int lane = threadIdx.x % 32;
  const int heads_per_token = p.num_heads + 2 * p.num_kv_heads;
  const int warps_per_token = (heads_per_token + kHeadsPerWarp - 1) / kHeadsPerWarp;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (warp >= static_cast<int64_t>(p.num_tokens) * warps_per_token) return;
  const int token = static_cast<int>(warp / warps_per_token);
  const int first_head = static_cast<int>(warp % warps_per_token) * kHeadsPerWarp;
  const int heads = min(kHeadsPerWarp, heads_per_token - first_head);
  const __nv_bfloat16* source = p.qkv + static_cast<int64_t>(token) * heads_per_token * kHeadDim;

  Vector loaded[kHeadsPerWarp] = {};
#pragma unroll
  for (int h = 0; h < kHeadsPerWarp; ++h)
    if (h < heads) loaded[h] = *reinterpret_cast<const Vector*>(source + (first_head + h) * kHeadDim + lane * kPerLane);

  float cos_v[kPerLane], sin_v[kPerLane];
  rope_angles<kHeadDim>(p.positions[token], p.inv_freq, lane, cos_v, sin_v);
  const int64_t slot = p.slots[token];
  const int64_t block = slot / p.block_size, offset = slot % p.block_size;

#pragma unroll
  for (int h = 0; h < kHeadsPerWarp; ++h) {
    if (h >= heads) break;
    const int head = first_head + h;
    float x[kPerLane];
    head_values<kHeadDim>(loaded[h], x);

    const bool is_q = head < p.num_heads;
    const bool is_k = !is_q && head < p.num_heads + p.num_kv_heads;
    if (is_q || is_k) norm_rope<kHeadDim>(x, is_q ? p.q_norm : p.k_norm, p.eps, cos_v, sin_v, lane);

    const int kv_head = is_q ? 0 : is_k ? head - p.num_heads : head - p.num_heads - p.num_kv_heads;
    const int64_t kv_vector = slot_vector(block, offset, kv_head, p.num_kv_heads, p.block_size);
    if (kFp8 && !is_q) {
      store_fp8_vector<kHeadDim>(x, (is_k ? p.k_fp8 : p.v_fp8) + kv_vector * kHeadDim,
                                 (is_k ? p.k_scales : p.v_scales) + kv_vector, lane);
      continue;
    }
    store_head_bf16<kHeadDim>(x,
                              is_q ? p.q_out + (static_cast<int64_t>(token) * p.num_heads + head) * kHeadDim
                                   : (is_k ? p.k_cache : p.v_cache) + kv_vector * kHeadDim,
                              lane);
  }
}

template <int kHeadDim, int kHeadsPerWarp, bool kFp8>
void launch_for(const QkNormRopeCacheWriteParams& params, const KernelStream& stream) {
  const int heads_per_token = params.num_heads + 2 * params.num_kv_heads;
  const int64_t warps =
      static_cast<int64_t>(params.num_tokens) * ((heads_per_token + kHeadsPerWarp - 1) / kHeadsPerWarp);
  const int blocks = static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_dependent(qk_norm_rope_cache_write_kernel<kHeadDim, kHeadsPerWarp, kFp8>, blocks, kWarpsPerBlock * 32, 0,
                   stream, params);
}

}  // namespace

void launch_qk_norm_rope_cache_write(const QkNormRopeCacheWriteParams& params, const KernelStream& stream) {
  if (params.num_tokens == 0) return;
  with_head_dim(params.head_dim, [&](auto dim) {
    constexpr int kHeadDim = decltype(dim)::value;
    const auto launch = [&](auto fp8) {
      if (params.num_tokens >= kManyTokens)
        launch_for<kHeadDim, kHeadsPerWarpForManyTokens, decltype(fp8)::value>(params, stream);
      else
        launch_for<kHeadDim, 1, decltype(fp8)::value>(params, stream);
    };
    if (params.k_fp8 != nullptr)
      launch(std::true_type{});
    else
      launch(std::false_type{});
  });
}

}  // namespace qinfer::cuda
