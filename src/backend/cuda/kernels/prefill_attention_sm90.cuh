// What the two Hopper prefill attention kernels share (prefill_attention_sm90.cu over a bf16 cache,
// prefill_attention_fp8_sm90.cu over the fp8 one): the block's shape, its query block and key tiles, and the
// online-softmax step in the wgmma accumulator layout (the device parts exist only in sm_90a code).
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/prefill_attention.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda::prefill_sm90 {

constexpr int kWarpgroupThreads = 128;
constexpr int kConsumers = 2;  // consumer warpgroups, 64 query rows each
constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;
constexpr int kBlockM = kConsumers * 64;  // query rows per block
constexpr int kBlockN = 128;              // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

struct TileRange {
  int head, seq, m_block, q_len, q_start, cached, context_len, num_tiles;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The block's work for grid (num_heads, num_prefill, ceil(max_q_len / kBlockM)), the heaviest (last) query blocks of
// all heads first; false when the query block lies past the sequence's new tokens.
__device__ __forceinline__ bool block_tile_range(const PrefillAttentionParams& p, TileRange& r) {
  r.head = blockIdx.x;
  r.seq = blockIdx.y;
  r.m_block = gridDim.z - 1 - blockIdx.z;
  r.q_len = p.q_lens[r.seq];
  if (r.m_block * kBlockM >= r.q_len) return false;
  r.q_start = p.q_starts[r.seq];
  r.cached = p.cached_lens[r.seq];
  r.context_len = r.cached + r.q_len;
  const int last_position = r.cached + min(r.q_len, (r.m_block + 1) * kBlockM) - 1;  // keys up to it are needed
  r.num_tiles = last_position / kBlockN + 1;
  return true;
}

// One online-softmax step on a tile of raw scores in the accumulator layout (this thread: rows lane/4 and lane/4 + 8 of
// its warp, columns first_key + 8 * block + 2 * (lane % 4) + {0, 1}): causal mask, row maxima over the 4 lanes of a
// row, probabilities exp2(score * row_scale - max * row_scale) in place (row_scale: the softmax scale in log2 units,
// times the row's query scale for an fp8 query), running sums; `correction` is the factor for the output accumulated
// so far.
template <bool kMasked, int kBlocks>
__device__ __forceinline__ void softmax_tile(float (&s)[kBlocks][4], int first_key, const int (&position)[2],
                                             const float (&row_scale)[2], float (&row_max)[2], float (&row_sum)[2],
                                             float (&correction)[2]) {
  static_assert((kBlocks & (kBlocks - 1)) == 0, "the row maxima are reduced as a tree over the n8 blocks");
  const int lane = threadIdx.x % 32;
  if (kMasked) {
#pragma unroll
    for (int nb = 0; nb < kBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (first_key + nb * 8 + (lane % 4) * 2 + (e % 2) > position[e / 2]) s[nb][e] = -INFINITY;
  }
  // Row maxima as a tree (depth 5 instead of a chain of 32 dependent fmaxf; max is exact, so the same value).
  float block_max[kBlocks][2];
#pragma unroll
  for (int nb = 0; nb < kBlocks; ++nb) {
    block_max[nb][0] = fmaxf(s[nb][0], s[nb][1]);
    block_max[nb][1] = fmaxf(s[nb][2], s[nb][3]);
  }
#pragma unroll
  for (int stride = 1; stride < kBlocks; stride *= 2)
#pragma unroll
    for (int nb = 0; nb + stride < kBlocks; nb += 2 * stride)
#pragma unroll
      for (int i = 0; i < 2; ++i) block_max[nb][i] = fmaxf(block_max[nb][i], block_max[nb + stride][i]);
  float tile_max[2] = {block_max[0][0], block_max[0][1]};
  float max_scaled[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
    const float new_max = fmaxf(row_max[i], tile_max[i]);
    max_scaled[i] = new_max == -INFINITY ? 0.0f : new_max * row_scale[i];
    correction[i] = sm90::fast_exp2(row_max[i] * row_scale[i] - max_scaled[i]);  // 0 while row_max is -inf
    row_max[i] = new_max;
    row_sum[i] *= correction[i];
  }
#pragma unroll
  for (int nb = 0; nb < kBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nb][e] = sm90::fast_exp2(fmaf(s[nb][e], row_scale[e / 2], -max_scaled[e / 2]));
      row_sum[e / 2] += s[nb][e];
    }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace qinfer::cuda::prefill_sm90
