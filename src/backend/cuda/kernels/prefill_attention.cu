#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kWarps * 16;  // query rows per block: 16 per warp
constexpr int kBlockN = 64;           // keys per tile
constexpr int kStages = 3;            // K/V tiles in flight or in use
template <int kHeadDim>
constexpr int kStageElements = 2 * kBlockN* kHeadDim;  // K tile, then V tile
constexpr float kLog2e = 1.4426950408889634f;

// grid (ceil(max_q_len / kBlockM), num_heads, num_prefill); the heaviest (last) query blocks are scheduled first.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(PrefillAttentionParams p) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kDimBlocks = kHeadDim / 8;  // n-blocks of 8 output dimensions
  const int m_block = gridDim.x - 1 - blockIdx.x, head = blockIdx.y, seq = blockIdx.z;
  const int q_len = p.q_lens[seq];
  if (m_block * kBlockM >= q_len) return;
  const int cached = p.cached_lens[seq], q_start = p.q_starts[seq];
  const int context_len = cached + q_len;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(p.table_rows[seq]) * p.block_table_stride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Three stages of K and V tiles: tile t + 2 is in flight while tile t is computed. The Q tile occupies the last
  // stage until its fragments are in registers.
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  __nv_bfloat16* stages = reinterpret_cast<__nv_bfloat16*>(shared_bytes);     // [kStages][K | V][kBlockN][kHeadDim]
  __nv_bfloat16* q_tile = stages + (kStages - 1) * kStageElements<kHeadDim>;  // [kBlockM][kHeadDim]
  static_assert(kBlockM <= 2 * kBlockN, "the Q tile must fit in one stage");

  for (int index = threadIdx.x; index < kBlockM * kChunks; index += kThreads) {
    const int row = index / kChunks, chunk = index % kChunks;
    const int q_index = m_block * kBlockM + row;
    const bool valid = q_index < q_len;
    const __nv_bfloat16* src =
        p.q + (static_cast<int64_t>(q_start + (valid ? q_index : 0)) * p.num_heads + head) * kHeadDim + chunk * 8;
    cp_async_16(q_tile + swizzle<kHeadDim>(row, chunk), src, valid);
  }
  // Keys up to the last query position of this block.
  const int last_position = cached + min(q_len, (m_block + 1) * kBlockM) - 1;
  const int num_tiles = last_position / kBlockN + 1;
  auto load_tile = [&](int tile) {
    __nv_bfloat16* stage = stages + (tile % kStages) * kStageElements<kHeadDim>;
    load_kv_tiles<kHeadDim, kThreads, kBlockN>(stage, stage + kBlockN * kHeadDim, p.k_cache, p.v_cache, table,
                                               tile * kBlockN, context_len, kv_head, p.num_kv_heads, p.block_size);
  };
  load_tile(0);
  cp_async_commit();  // group: Q and tile 0
  if (num_tiles > 1) load_tile(1);
  cp_async_commit();  // group: tile 1
  cp_async_wait_group<1>();
  __syncthreads();

  uint32_t q_frag[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const int row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
    ldmatrix_x4(q_frag[kk], q_tile + swizzle<kHeadDim>(row, kk * 2 + lane / 16));
  }
  __syncthreads();  // the Q area becomes stage kStages - 1

  // This thread's rows within the block: g and g + 8 of its warp's 16.
  const int row_base = warp * 16 + lane / 4;
  const int position[2] = {cached + m_block * kBlockM + row_base, cached + m_block * kBlockM + row_base + 8};
  const int first_masked_tile = (cached + m_block * kBlockM) / kBlockN;  // earlier tiles need no causal mask
  const float scale_log2 = p.scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  float o[kDimBlocks][4] = {};

  for (int tile = 0; tile < num_tiles; ++tile) {
    if (tile + 2 < num_tiles) load_tile(tile + 2);
    cp_async_commit();  // one group per iteration (possibly empty), so tile t is always two groups back
    cp_async_wait_group<2>();
    __syncthreads();
    const __nv_bfloat16* k_tile = stages + (tile % kStages) * kStageElements<kHeadDim>;
    const __nv_bfloat16* v_tile = k_tile + kBlockN * kHeadDim;

    float s[kBlockN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int pair = 0; pair < kBlockN / 16; ++pair) {
        uint32_t b[4];
        const int row = pair * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(b, k_tile + swizzle<kHeadDim>(row, kk * 2 + (lane / 8) % 2));
        mma_bf16(s[2 * pair], q_frag[kk], b[0], b[1]);
        mma_bf16(s[2 * pair + 1], q_frag[kk], b[2], b[3]);
      }
    }

    const bool needs_mask = tile >= first_masked_tile;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = tile * kBlockN + nb * 8 + (lane % 4) * 2 + (e % 2);
        float value = s[nb][e] * scale_log2;
        if (needs_mask && key > position[e / 2]) value = -INFINITY;
        s[nb][e] = value;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], value);
      }
    online_softmax_step(s, tile_max, row_max, row_sum, o);

#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int pair = 0; pair < kHeadDim / 16; ++pair) {
        uint32_t b[4];
        const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        ldmatrix_x4_trans(b, v_tile + swizzle<kHeadDim>(row, pair * 2 + lane / 16));
        mma_bf16(o[2 * pair], a, b[0], b[1]);
        mma_bf16(o[2 * pair + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // everyone is done with this stage before it is refilled
  }

  store_attention_rows<kHeadDim>(o, row_sum, p.out, p.num_heads, head, q_start, q_len, m_block * kBlockM + row_base);
}

template <int kHeadDim>
void launch_for_head_dim(const PrefillAttentionParams& p, const KernelStream& stream) {
  constexpr int kSharedBytes = kStages * kStageElements<kHeadDim> * 2;
  CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kSharedBytes));
  const dim3 grid((p.max_q_len + kBlockM - 1) / kBlockM, p.num_heads, p.num_prefill);
  prefill_attention_kernel<kHeadDim><<<grid, kThreads, kSharedBytes, stream.stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_prefill_attention_mma_sync(const PrefillAttentionParams& params, const KernelStream& stream) {
  if (params.num_prefill == 0 || params.max_q_len == 0) return;
  QINFER_CHECK(params.num_kv_heads > 0 && params.num_heads % params.num_kv_heads == 0);
  QINFER_CHECK(params.block_size > 0);
  with_head_dim(params.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(params, stream); });
}

void launch_prefill_attention(const PrefillAttentionParams& params, const KernelStream& stream) {
  if (params.block_size % 16 == 0 && prefill_attention_wgmma_available(stream.device))
    launch_prefill_attention_wgmma(params, stream);
  else
    launch_prefill_attention_mma_sync(params, stream);
}

}  // namespace qinfer::cuda
