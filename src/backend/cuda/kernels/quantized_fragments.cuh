// Reading the quantized tile layout (quantized_weight_layout.h) on the device: one lane's loads of a weight row's
// 128-k tile, and each 32-k group of them decoded to the bf16x8 mma fragment of gemv_mma_epilogue.cuh's mma_group
// (.x = elements 0, 1 of the lane's eight, .y = 2, 3, .z = 4, 5, .w = 6, 7) plus the group's fp32 scale.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/quantized_format.h"

namespace qinfer::cuda {

template <QuantizedFormat kFormat>
inline constexpr int kQuantizedTileWords = kFormat == QuantizedFormat::kInt4 ? 16 : 32;

// One lane's share of one row's tile: its 32-k groups' codes, 16 bytes (int4) or 32 (fp8), and their metadata: one
// word for the whole tile when the scale group spans it (kMetaPerTile 1: groups of 128 or more), else one per 32-k
// group (kMetaPerTile 4).
template <QuantizedFormat kFormat, int kMetaPerTile>
struct QuantizedLaneTile {
  static_assert(kMetaPerTile == 1 || kMetaPerTile == 4);
  static constexpr int kLoads = kQuantizedTileWords<kFormat> / 16;
  uint4 codes[kLoads];
  uint32_t meta[kMetaPerTile];  // int4 {f16 scale | bf16(128 + zero) << 16}, fp8 the fp32 scale's bits
};

// Loads lane t's share of `tile` of a row: `row_codes` and `row_scales` point at the row's packed words and scales.
template <QuantizedFormat kFormat, int kMetaPerTile>
__device__ __forceinline__ QuantizedLaneTile<kFormat, kMetaPerTile> load_lane_tile(const uint32_t* row_codes,
                                                                                   const uint32_t* row_scales, int tile,
                                                                                   int t, int group_size,
                                                                                   int scale_groups) {
  QuantizedLaneTile<kFormat, kMetaPerTile> lane_tile;
  const uint32_t* run = row_codes + tile * kQuantizedTileWords<kFormat> + t * (kQuantizedTileWords<kFormat> / 4);
#pragma unroll
  for (int l = 0; l < lane_tile.kLoads; ++l) lane_tile.codes[l] = load_streaming(run + 4 * l);
#pragma unroll
  for (int m = 0; m < kMetaPerTile; ++m)
    lane_tile.meta[m] = __ldg(row_scales + min((tile * 4 + m) * 32 / group_size, scale_groups - 1));
  return lane_tile;
}

__device__ __forceinline__ uint32_t bf16x2_bits(__nv_bfloat162 v) { return reinterpret_cast<const uint32_t&>(v); }

// Eight int4 codes (nibble order kInt4NibbleOfElement) minus their zero point, exactly, as bf16: a code c in the low
// mantissa bits of bf16 128 is the value 128 + c, and (128 + c) - (128 + zero) is an integer in [-16, 15].
__device__ __forceinline__ uint4 int4_fragment(uint32_t word, uint32_t meta) {
  const uint32_t zero_bits = __byte_perm(meta, 0, 0x3232);  // bf16(128 + zero) in both halves
  const __nv_bfloat162 zero = reinterpret_cast<const __nv_bfloat162&>(zero_bits);
  const auto pair = [zero](uint32_t shifted) {
    const uint32_t biased = (shifted & 0x000f000fu) | 0x43004300u;
    return bf16x2_bits(__hsub2(reinterpret_cast<const __nv_bfloat162&>(biased), zero));
  };
  return {pair(word), pair(word >> 4), pair(word >> 8), pair(word >> 12)};
}

// Two E4M3 values (low byte first) as bf16, exactly: every E4M3 value is a bf16 value.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t two_codes) {
  const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return bf16x2_bits(__float22bfloat162_rn(__half22float2(__half2(raw))));
}

__device__ __forceinline__ uint4 fp8_fragment(uint32_t first4, uint32_t last4) {
  return {e4m3x2_to_bf16x2(first4), e4m3x2_to_bf16x2(first4 >> 16), e4m3x2_to_bf16x2(last4),
          e4m3x2_to_bf16x2(last4 >> 16)};
}

// Group `group` (0..3, a compile-time index after unrolling) of a lane's tile as an mma fragment, unscaled.
template <QuantizedFormat kFormat, int kMetaPerTile>
__device__ __forceinline__ uint4 group_fragment(const QuantizedLaneTile<kFormat, kMetaPerTile>& lane_tile, int group) {
  if constexpr (kFormat == QuantizedFormat::kInt4) {
    const uint4& v = lane_tile.codes[0];
    const uint32_t word = group == 0 ? v.x : group == 1 ? v.y : group == 2 ? v.z : v.w;
    return int4_fragment(word, lane_tile.meta[kMetaPerTile == 1 ? 0 : group]);
  } else {
    const uint4& v = lane_tile.codes[group / 2];
    return group % 2 == 0 ? fp8_fragment(v.x, v.y) : fp8_fragment(v.z, v.w);
  }
}

template <QuantizedFormat kFormat, int kMetaPerTile>
__device__ __forceinline__ float group_scale(const QuantizedLaneTile<kFormat, kMetaPerTile>& lane_tile, int group) {
  const uint32_t meta = lane_tile.meta[kMetaPerTile == 1 ? 0 : group];
  if constexpr (kFormat == QuantizedFormat::kInt4)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(meta & 0xffffu)));
  else
    return __uint_as_float(meta);
}

}  // namespace qinfer::cuda
