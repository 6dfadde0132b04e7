#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"

namespace qinfer::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

// One warp per (token, head) over q, k and v heads. Lane l holds elements [l*E, l*E+E) with E = head_dim/32, so the
// rotate-half partner of element i (i + head_dim/2) sits in lane l ^ 16.
template <int kHeadDim>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) qk_norm_rope_cache_write_kernel(QkNormRopeCacheWriteParams p) {
  constexpr int kPerLane = kHeadDim / 32;
  allow_dependents();
  wait_for_producer();
  const int lane = threadIdx.x % 32;
  const int heads_per_token = p.num_heads + 2 * p.num_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= static_cast<int64_t>(p.num_tokens) * heads_per_token) return;
  const int token = static_cast<int>(item / heads_per_token);
  const int head = static_cast<int>(item % heads_per_token);
  const __nv_bfloat16* src = p.qkv + item * kHeadDim + lane * kPerLane;

  float x[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) x[i] = __bfloat162float(src[i]);

  const bool is_q = head < p.num_heads;
  const bool is_k = !is_q && head < p.num_heads + p.num_kv_heads;
  if (is_q || is_k) {
    float sum_squares = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) sum_squares += x[i] * x[i];
    const float inv_rms = rsqrtf(warp_sum(sum_squares) / kHeadDim + p.eps);
    const __nv_bfloat16* norm = (is_q ? p.q_norm : p.k_norm) + lane * kPerLane;
    // Norm output rounds to bf16 as in HF, before RoPE.
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      x[i] = __bfloat162float(
          __float2bfloat16(__bfloat162float(__float2bfloat16(x[i] * inv_rms)) * __bfloat162float(norm[i])));
    const float position = static_cast<float>(p.positions[token]);
    const bool first_half = lane < 16;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float partner = __shfl_xor_sync(0xffffffffu, x[i], 16);
      const int freq_index = (lane % 16) * kPerLane + i;
      float sin_v, cos_v;
      sincosf(position * p.inv_freq[freq_index], &sin_v, &cos_v);
      // rotate_half(x) = [-x2, x1]
      x[i] = first_half ? x[i] * cos_v - partner * sin_v : x[i] * cos_v + partner * sin_v;
    }
  }

  __nv_bfloat16* dst;
  if (is_q) {
    dst = p.q_out + (static_cast<int64_t>(token) * p.num_heads + head) * kHeadDim;
  } else {
    const int kv_head = is_k ? head - p.num_heads : head - p.num_heads - p.num_kv_heads;
    const int64_t slot = p.slots[token];
    const int64_t block = slot / p.block_size, offset = slot % p.block_size;
    dst = (is_k ? p.k_cache : p.v_cache) + ((block * p.num_kv_heads + kv_head) * p.block_size + offset) * kHeadDim;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) dst[lane * kPerLane + i] = __float2bfloat16(x[i]);
}

}  // namespace

void launch_qk_norm_rope_cache_write(const QkNormRopeCacheWriteParams& params, cudaStream_t stream) {
  if (params.num_tokens == 0) return;
  const int64_t items = static_cast<int64_t>(params.num_tokens) * (params.num_heads + 2 * params.num_kv_heads);
  const int blocks = static_cast<int>((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
  with_head_dim(params.head_dim, [&](auto dim) {
    launch_dependent(qk_norm_rope_cache_write_kernel<decltype(dim)::value>, blocks, kWarpsPerBlock * 32, 0, stream,
                     params);
  });
}

}  // namespace qinfer::cuda
