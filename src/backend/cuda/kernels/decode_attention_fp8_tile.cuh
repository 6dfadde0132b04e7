// Parts of the fp8-cache decode attention (decode_attention_fp8.cu) besides its fragments: the ring depth, the query
// fragments as fp16, the scores-to-probabilities step with the scales folded in where they cost least (a key's K
// scale multiplies its score, its V scale its probability), the launch and the final V-scale fix-up.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda::decode_block {

// Three stages keep a block at 53.5 KB of shared memory (head_dim 128, Fp8Layout), so four blocks fit on an SM: the
// loop is bound by each tile's chain of dependent steps, and more resident blocks hide it.
constexpr int kFp8Stages = 3;
constexpr int kWarpKeys = kTileTokens / kWarps;  // 16 keys of a tile per warp

// The query fragments as fp16: exact for bf16 values inside fp16's range (normalised, rotated queries are far inside).
template <int kHeadDim>
__device__ __forceinline__ void query_fragments_to_f16(uint32_t (&q_frag)[kHeadDim / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q_frag[kk][i]));
      q_frag[kk][i] = pack_f16(pair.x, pair.y);
    }
}

// From this warp's scores of a tile (q . code_k, in the m16n8 accumulator layout; this thread's keys are
// warp * 16 + nb * 8 + 2 * (lane % 4) + {0, 1}, nb in {0, 1}) to the P·V A fragment `a`: each score times its key's
// K scale, masked at `end`, one online-softmax step, and each probability times its key's V scale. To keep
// p * scale_v within [0, 1] (fp16), the warp's O is held in units of `v_reference`, the largest V scale it has seen:
// when a tile raises it, O is rescaled once; the caller multiplies O by it at the end. Masked keys' V scales count as
// zero (a partial tile's last scale chunk may copy stale or NaN scales past `end`; 0 * NaN is NaN).
template <int kHeadDim>
__device__ __forceinline__ void fp8_tile_probabilities(WarpState<kHeadDim>& st, float& v_reference, float (&s)[2][4],
                                                       const float* k_scales, const float* v_scales, int tile_first,
                                                       int end, float scale_log2, int warp, int lane,
                                                       uint32_t (&a)[4]) {
  float2 k_scale[2], v_scale[2];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    const int key = warp * kWarpKeys + nb * 8 + (lane % 4) * 2;
    k_scale[nb] = *reinterpret_cast<const float2*>(k_scales + key);
    v_scale[nb] = *reinterpret_cast<const float2*>(v_scales + key);
    if (tile_first + key >= end) v_scale[nb].x = 0;
    if (tile_first + key + 1 >= end) v_scale[nb].y = 0;
  }
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = tile_first + warp * kWarpKeys + nb * 8 + (lane % 4) * 2 + (e % 2);
      const float value = key < end ? s[nb][e] * (e % 2 ? k_scale[nb].y : k_scale[nb].x) * scale_log2 : -INFINITY;
      s[nb][e] = value;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], value);
    }
  online_softmax_step(s, tile_max, st.row_max, st.row_sum, st.o);

  float tile_v_max = fmaxf(fmaxf(v_scale[0].x, v_scale[0].y), fmaxf(v_scale[1].x, v_scale[1].y));
  tile_v_max = fmaxf(tile_v_max, __shfl_xor_sync(0xffffffffu, tile_v_max, 1));
  tile_v_max = fmaxf(tile_v_max, __shfl_xor_sync(0xffffffffu, tile_v_max, 2));  // over the warp's 16 keys
  if (tile_v_max > v_reference) {                                               // the same in every lane
    const float ratio = v_reference / tile_v_max;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[nb][e] *= ratio;
    v_reference = tile_v_max;
  }
  const float inverse = v_reference > 0 ? 1.0f / v_reference : 0.0f;
  const float v0 = v_scale[0].x * inverse, v1 = v_scale[0].y * inverse, v2 = v_scale[1].x * inverse,
              v3 = v_scale[1].y * inverse;
  a[0] = pack_f16(s[0][0] * v0, s[0][1] * v1);
  a[1] = pack_f16(s[0][2] * v0, s[0][3] * v1);
  a[2] = pack_f16(s[1][0] * v2, s[1][1] * v3);
  a[3] = pack_f16(s[1][2] * v2, s[1][3] * v3);
}

// Launches the fp8 kernel: `kernel_for(std::integral_constant<int, head_dim>)` gives {kernel, dynamic shared bytes}
// of a head_dim; grid (num_splits, num_kv_heads, num_decode) of kThreads, the carveout set for as many resident
// blocks as shared memory allows.
template <typename KernelFor>
void launch_fp8_decode_kernel(const DecodeAttentionParams& p, cudaStream_t stream, KernelFor kernel_for) {
  QINFER_CHECK(p.k_fp8 != nullptr && p.v_fp8 != nullptr && p.k_scales != nullptr && p.v_scales != nullptr &&
               p.block_size % 16 == 0);
  if (p.num_decode == 0) return;
  with_head_dim(p.head_dim, [&](auto dim) {
    const auto [kernel, shared_bytes] = kernel_for(dim);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    launch_dependent(kernel, dim3(p.num_splits, p.num_kv_heads, p.num_decode), kThreads, shared_bytes, stream, p);
  });
}

// The warp's O in units of `v_reference` (fp8_tile_probabilities) back to real units, before finish_block merges the
// warps.
template <int kHeadDim>
__device__ __forceinline__ void apply_v_reference(WarpState<kHeadDim>& st, float v_reference) {
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[nb][e] *= v_reference;
}

}  // namespace qinfer::cuda::decode_block
