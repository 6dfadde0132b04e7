// The per-warp tile step of the fp8-cache decode attention (decode_attention_fp8.cu), apart from how tiles reach shared
// memory (decode_attention.cu's split planner needs its layout too): the shared-memory layout, each warp's conversion
// of its 16 keys' E4M3 bytes into an fp16 staging tile (one packed cvt per two values; every E4M3 value is exact in
// fp16), and the fp16 tensor-core step with the scales folded in where they cost least: a key's K scale multiplies its
// score, its V scale its probability.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention_block.cuh"
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

// attend_tile over fp16 codes of this warp's 16 keys of a tile (`k_tile`, `v_tile`: the tile's bytes), staged one
// after the other in `staging`: score = (q . code_k) * scale_k; O += p * scale_v * code_v. To keep p * scale_v within
// [0, 1] (fp16), the warp's O is held in units of `v_reference`, the largest V scale it has seen: when a tile raises
// it, O is rescaled once; the caller multiplies O by it at the end. This thread's keys are
// warp * 16 + nb * 8 + 2 * (lane % 4) + {0, 1}, nb in {0, 1}.
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
  float2 k_scale[2], v_scale[2];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    const int key = warp * kWarpKeys + nb * 8 + (lane % 4) * 2;
    k_scale[nb] = *reinterpret_cast<const float2*>(k_scales + key);
    v_scale[nb] = *reinterpret_cast<const float2*>(v_scales + key);
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
  __syncwarp();
  const uint32_t a[4] = {pack_f16(s[0][0] * v0, s[0][1] * v1), pack_f16(s[0][2] * v0, s[0][3] * v1),
                         pack_f16(s[1][0] * v2, s[1][1] * v3), pack_f16(s[1][2] * v2, s[1][3] * v3)};
#pragma unroll
  for (int pair = 0; pair < kHeadDim / 16; ++pair) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, staging + swizzle<kHeadDim>((lane % 8) + ((lane / 8) % 2) * 8, pair * 2 + lane / 16));
    mma_f16(st.o[2 * pair], a, b[0], b[1]);
    mma_f16(st.o[2 * pair + 1], a, b[2], b[3]);
  }
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
