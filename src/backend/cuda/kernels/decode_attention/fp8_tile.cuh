// Parts of the fp8-cache decode attention (fp8_cp_async.cu) besides its fragments (its ring depth is in
// geometry.h): a warp's state and the scores-to-probabilities step with the scales folded in where they cost least (a
// key's K scale multiplies its score, its V scale its probability).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda::decode_block {

// A warp's running maximum of a head is raised (and O rescaled) only when a tile's maximum exceeds it by more than
// this (log2 units): probabilities then stay below 2^8, far inside fp16, and the result is the same up to rounding,
// since sums and O are kept relative to whichever maximum is held.
constexpr float kRescaleThreshold = 8.0f;

// One warp's online-softmax state over its keys in the transposed layout: lane holds heads hb * 8 + 2 (lane % 4) +
// {0, 1} of each head block hb, and rows lane / 4 and lane / 4 + 8 of each Oᵀ m-tile (head dims output_dim).
template <int kHeadDim, int kHeadBlocks>
struct Fp8WarpState {
  uint32_t q[kHeadDim / 16][kHeadBlocks][2];  // Qᵀ B fragments per 16-dim step (load_query_fragments_t)
  float o[kHeadDim / 16][kHeadBlocks][4];     // Oᵀ in units of v_reference * fp8_code_unit()
  float row_max[kHeadBlocks][2];              // of this lane's two heads per block, the same in its 8 lanes
  float row_sum[kHeadBlocks][2];              // over this lane's keys only
  float v_reference = 0, v_inverse = 0;       // the largest V scale seen by the warp, and its inverse

  __device__ Fp8WarpState() {
#pragma unroll
    for (int hb = 0; hb < kHeadBlocks; ++hb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[hb][h] = -INFINITY;
        row_sum[hb][h] = 0;
      }
#pragma unroll
      for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][hb][e] = 0;
    }
  }
};

// A bf16 pair as an fp16 pair: exact for values inside fp16's range (normalised, rotated queries are far inside).
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t pair) {
  const float2 values = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
  return pack_f16(values.x, values.y);
}

// An 8 x 8 b16 matrix in the mma fragment layout (lane holds row lane / 4, columns 2 (lane % 4) + {0, 1}) transposed.
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t fragment) {
  uint32_t transposed;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(transposed) : "r"(fragment));
  return transposed;
}

// Maximum over the 8 lanes that share lane % 4 (the 16 keys of the warp in the transposed accumulator layout).
__device__ __forceinline__ float max_over_keys(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 4));
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 8));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 16));
}

// From this warp's scores of a tile (code_k . q in the Sᵀ accumulator layout: keys `key` (elements 0, 1) and
// `key` + 8 (2, 3) of the tile, heads 2 (lane % 4) + {0, 1} of each head block) to the Pᵀ B fragments `p_t`: each score
// times its key's K scale, masked at `end`, one online-softmax step (maximum raised lazily, kRescaleThreshold), and
// each probability times its key's V scale. To keep p * scale_v within fp16, the warp's O is held in units of
// `v_reference`, the largest V scale it has seen: when a tile raises it, O is rescaled once. Masked keys' V scales
// count as zero (a partial tile's last scale chunk may copy stale or NaN scales past `end`; 0 * NaN is NaN).
// `key_scale(half)` / `value_scale(half)` give the K / V scale of the lane's key (half 0) or key + 8 (half 1), whose
// position in the sequence is `first_key` (+ 8); value_scale is asked only for keys before `end`.
template <int kHeadDim, int kHeadBlocks, typename KeyScale, typename ValueScale>
__device__ __forceinline__ void fp8_probabilities(Fp8WarpState<kHeadDim, kHeadBlocks>& st, float (&s)[kHeadBlocks][4],
                                                  KeyScale key_scale, ValueScale value_scale, int first_key, int end,
                                                  float scale_log2, uint32_t (&p_t)[kHeadBlocks][2]) {
  bool valid[2];
  float k_scale[2], v_scale[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    valid[half] = first_key + 8 * half < end;
    k_scale[half] = key_scale(half) * scale_log2;
    v_scale[half] = valid[half] ? value_scale(half) : 0.0f;
  }
  float tile_max[kHeadBlocks][2];
  bool raise = false;
#pragma unroll
  for (int hb = 0; hb < kHeadBlocks; ++hb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[hb][e] = valid[e / 2] ? s[hb][e] * k_scale[e / 2] : -INFINITY;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[hb][h] = max_over_keys(fmaxf(s[hb][h], s[hb][h + 2]));
      raise |= tile_max[hb][h] > st.row_max[hb][h] + kRescaleThreshold;
    }
  }
  if (__any_sync(0xffffffffu, raise)) {
    float correction[kHeadBlocks][2];
#pragma unroll
    for (int hb = 0; hb < kHeadBlocks; ++hb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float new_max = fmaxf(st.row_max[hb][h], tile_max[hb][h]);
        correction[hb][h] = rescale_factor(st.row_max[hb][h], new_max);
        st.row_max[hb][h] = new_max;
        st.row_sum[hb][h] *= correction[hb][h];
      }
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int hb = 0; hb < kHeadBlocks; ++hb)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.o[j][hb][e] *= correction[hb][e % 2];
  }

  const float tile_v_max = max_over_keys(fmaxf(v_scale[0], v_scale[1]));
  if (tile_v_max > st.v_reference) {  // the same in every lane
    const float ratio = st.v_reference / tile_v_max;
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int hb = 0; hb < kHeadBlocks; ++hb)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.o[j][hb][e] *= ratio;
    st.v_reference = tile_v_max;
    st.v_inverse = 1.0f / tile_v_max;
  }
  const float v_weight[2] = {v_scale[0] * st.v_inverse, v_scale[1] * st.v_inverse};
#pragma unroll
  for (int hb = 0; hb < kHeadBlocks; ++hb) {
    float prob[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float m = st.row_max[hb][e % 2];
      prob[e] = m == -INFINITY ? 0.0f : exp2f(s[hb][e] - m);
      st.row_sum[hb][e % 2] += prob[e];
    }
    // Keys `key` and `key` + 8 as rows, heads as columns: transposed into Pᵀ's k16 x n8 B fragment.
    p_t[hb][0] = transpose_8x8(pack_f16(prob[0] * v_weight[0], prob[1] * v_weight[0]));
    p_t[hb][1] = transpose_8x8(pack_f16(prob[2] * v_weight[1], prob[3] * v_weight[1]));
  }
}

}  // namespace qinfer::cuda::decode_block
