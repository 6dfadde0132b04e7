// The per-warp tile step of the fp8-cache decode attention (decode_attention_fp8.cu), apart from how tiles reach shared
// memory (decode_attention.cu's split planner needs its layout too): the shared-memory layout, each warp's conversion
// of its 16 keys' E4M3 bytes into an fp16 staging tile (one packed cvt per two values; every E4M3 value is exact in
// fp16), and the fp16 tensor-core step with the scales folded in where they cost least: a key's K scale multiplies its
// score, its V scale its probability.
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

// Three stages and one staging tile per warp (K, then V) keep a block at 65.5 KB of shared memory (head_dim 128), so
// three blocks fit on an SM: the loop is bound by each tile's chain of dependent steps, and more resident blocks hide
// it.
constexpr int kFp8Stages = 3;
constexpr int kWarpKeys = kTileTokens / kWarps;  // 16 keys of a tile per warp

// Shared memory of both fp8 kernels: the fp8 ring [kFp8Stages][K|V][kTileTokens][kHeadDim] bytes, the scale ring
// [kFp8Stages][K|V][kTileTokens] fp32, and the staging tiles [kWarps][kWarpKeys][kHeadDim] fp16 (swizzled).
template <int kHeadDim>
struct Fp8Layout {
  static constexpr int kTileBytes = kTileTokens * kHeadDim;  // one K or V tile of bytes
  static constexpr int kRingBytes = kFp8Stages * 2 * kTileBytes;
  static constexpr int kScaleBytes = kFp8Stages * 2 * kTileTokens * 4;
  static constexpr int kStagingElements = kWarpKeys * kHeadDim;  // one warp's staging tile
  static constexpr int kStagingBytes = kWarps * kStagingElements * 2;
  static constexpr int kSharedBytes = kRingBytes + kScaleBytes + kStagingBytes;
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= kRingBytes, "finish_block's merge scratch must fit in the ring");
};

// 16 E4M3 values as 16 fp16 (two 16-byte chunks), exactly: packed fp8x2 -> f16x2 conversions.
__device__ __forceinline__ void fp8x16_to_f16(const uint4& bytes, uint4 (&out)[2]) {
  const uint32_t words[4] = {bytes.x, bytes.y, bytes.z, bytes.w};
  uint32_t* packed = reinterpret_cast<uint32_t*>(out);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const __half2_raw pair =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] >> (16 * half)), __NV_E4M3);
      packed[2 * i + half] = static_cast<uint32_t>(pair.x) | (static_cast<uint32_t>(pair.y) << 16);
    }
}

// This warp's 16 keys of a K or V tile of bytes into its staging tile [kWarpKeys][kHeadDim] fp16, swizzled as
// swizzle<>().
template <int kHeadDim>
__device__ __forceinline__ void stage_warp_keys(const uint8_t* tile, __half* staging, int warp, int lane) {
  constexpr int kChunks = kHeadDim / 16;  // 16-byte fp8 chunks per key
#pragma unroll
  for (int index = lane; index < kWarpKeys * kChunks; index += 32) {
    const int row = index / kChunks, chunk = index % kChunks;
    uint4 values[2];
    fp8x16_to_f16(*reinterpret_cast<const uint4*>(tile + (warp * kWarpKeys + row) * kHeadDim + chunk * 16), values);
    *reinterpret_cast<uint4*>(staging + swizzle<kHeadDim>(row, 2 * chunk)) = values[0];
    *reinterpret_cast<uint4*>(staging + swizzle<kHeadDim>(row, 2 * chunk + 1)) = values[1];
  }
}

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

// attend_tile over fp16 codes of this warp's 16 keys of a tile (`k_tile`, `v_tile`: the tile's bytes), staged one
// after the other in `staging`: score = (q . code_k) * scale_k; O += p * scale_v * code_v (fp8_tile_probabilities).
template <int kHeadDim>
__device__ __forceinline__ void attend_fp8_tile(WarpState<kHeadDim>& st, float& v_reference, __half* staging,
                                                const uint8_t* k_tile, const uint8_t* v_tile, const float* k_scales,
                                                const float* v_scales, int tile_first, int end, float scale_log2,
                                                int warp, int lane) {
  stage_warp_keys<kHeadDim>(k_tile, staging, warp, lane);
  __syncwarp();
  float s[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t b[4];
    ldmatrix_x4(b, staging + swizzle<kHeadDim>((lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
    mma_f16(s[0], st.q_frag[kk], b[0], b[1]);
    mma_f16(s[1], st.q_frag[kk], b[2], b[3]);
  }
  __syncwarp();  // the K codes are read: V's take their place
  stage_warp_keys<kHeadDim>(v_tile, staging, warp, lane);
  uint32_t a[4];
  fp8_tile_probabilities<kHeadDim>(st, v_reference, s, k_scales, v_scales, tile_first, end, scale_log2, warp, lane, a);
  __syncwarp();
#pragma unroll
  for (int pair = 0; pair < kHeadDim / 16; ++pair) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, staging + swizzle<kHeadDim>((lane % 8) + ((lane / 8) % 2) * 8, pair * 2 + lane / 16));
    mma_f16(st.o[2 * pair], a, b[0], b[1]);
    mma_f16(st.o[2 * pair + 1], a, b[2], b[3]);
  }
}

// Launches either fp8 kernel: `kernel_for(std::integral_constant<int, head_dim>)` gives {kernel, dynamic shared bytes}
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

// The warp's O in units of `v_reference` (attend_fp8_tile) back to real units, before finish_block merges the warps.
template <int kHeadDim>
__device__ __forceinline__ void apply_v_reference(WarpState<kHeadDim>& st, float v_reference) {
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[nb][e] *= v_reference;
}

}  // namespace qinfer::cuda::decode_block
