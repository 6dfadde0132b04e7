// Per-head math of Qwen3's attention input, shared by the QK-norm/RoPE/cache-write kernel and the register decode
// attention kernels that do the same work for their own heads (so both give bit-identical q and K/V): a warp holds one
// head, lane l elements [l*E, l*E+E) with E = head_dim/32, so the rotate-half partner of element i (i + head_dim/2)
// sits in lane l ^ 16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels/device_math.cuh"

namespace qinfer::cuda::qk_rope {

template <int kHeadDim>
using LaneVector = std::conditional_t<kHeadDim == 128, uint2, uint32_t>;  // E bf16 values
template <int kHeadDim>
using LaneBytes = std::conditional_t<kHeadDim == 128, uint32_t, uint16_t>;  // E fp8 values

// The (token, KV head) vector of the cache slot (block, offset) in a pool viewed as [num_blocks * num_kv_heads *
// block_size] vectors (K/V pools of head_dim elements, fp8 scale pools of one).
__device__ __forceinline__ int64_t slot_vector(int64_t block, int64_t offset, int kv_head, int num_kv_heads,
                                               int block_size) {
  return (block * num_kv_heads + kv_head) * block_size + offset;
}

// cos / sin of the lane's rotation angles at `position`.
template <int kHeadDim>
__device__ __forceinline__ void rope_angles(int position, const float* inv_freq, int lane,
                                            float (&cos_v)[kHeadDim / 32], float (&sin_v)[kHeadDim / 32]) {
  constexpr int kPerLane = kHeadDim / 32;
  const float at = static_cast<float>(position);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sincosf(at * inv_freq[(lane % 16) * kPerLane + i], &sin_v[i], &cos_v[i]);
}

// The lane's values of one head as floats.
template <int kHeadDim>
__device__ __forceinline__ void head_values(const LaneVector<kHeadDim>& loaded, float (&x)[kHeadDim / 32]) {
  const __nv_bfloat16* values = reinterpret_cast<const __nv_bfloat16*>(&loaded);
#pragma unroll
  for (int i = 0; i < kHeadDim / 32; ++i) x[i] = __bfloat162float(values[i]);
}

// The lane's elements of a head's norm weight `norm`, as floats.
template <int kHeadDim>
__device__ __forceinline__ void norm_weights(const __nv_bfloat16* norm, int lane, float (&weight)[kHeadDim / 32]) {
#pragma unroll
  for (int i = 0; i < kHeadDim / 32; ++i) weight[i] = __bfloat162float(norm[lane * (kHeadDim / 32) + i]);
}

// RMSNorm over the head with the lane's norm weights (output rounded to bf16 as in HF, before RoPE), then rotate-half
// RoPE.
template <int kHeadDim>
__device__ __forceinline__ void norm_rope(float (&x)[kHeadDim / 32], const float (&weight)[kHeadDim / 32], float eps,
                                          const float (&cos_v)[kHeadDim / 32], const float (&sin_v)[kHeadDim / 32],
                                          int lane) {
  constexpr int kPerLane = kHeadDim / 32;
  float sum_squares = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sum_squares += x[i] * x[i];
  const float inv_rms = rsqrtf(warp_sum(sum_squares) / kHeadDim + eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    x[i] = __bfloat162float(__float2bfloat16(__bfloat162float(__float2bfloat16(x[i] * inv_rms)) * weight[i]));
  const bool first_half = lane < 16;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, x[i], 16);
    // rotate_half(x) = [-x2, x1]
    x[i] = first_half ? x[i] * cos_v[i] - partner * sin_v[i] : x[i] * cos_v[i] + partner * sin_v[i];
  }
}

// The same with the norm weight read from `norm`.
template <int kHeadDim>
__device__ __forceinline__ void norm_rope(float (&x)[kHeadDim / 32], const __nv_bfloat16* norm, float eps,
                                          const float (&cos_v)[kHeadDim / 32], const float (&sin_v)[kHeadDim / 32],
                                          int lane) {
  float weight[kHeadDim / 32];
  norm_weights<kHeadDim>(norm, lane, weight);
  norm_rope<kHeadDim>(x, weight, eps, cos_v, sin_v, lane);
}

// The lane's values as bf16 at `head` (the head's first element).
template <int kHeadDim>
__device__ __forceinline__ void store_head_bf16(const float (&x)[kHeadDim / 32], __nv_bfloat16* head, int lane) {
  constexpr int kPerLane = kHeadDim / 32;
  LaneVector<kHeadDim> stored;
  __nv_bfloat16* out = reinterpret_cast<__nv_bfloat16*>(&stored);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) out[i] = __float2bfloat16(x[i]);
  *reinterpret_cast<LaneVector<kHeadDim>*>(head + lane * kPerLane) = stored;
}

// One (token, KV head) vector into the fp8 cache: the lanes' E values each, the scale by lane 0. The operations of
// quantize_fp8_e4m3_vector (util/fp8.h): amax, inverse = 448 / amax (IEEE division), e4m3(x * inverse), amax / 448.
template <int kHeadDim>
__device__ __forceinline__ void store_fp8_vector(const float (&x)[kHeadDim / 32], uint8_t* destination, float* scale,
                                                 int lane) {
  constexpr int kPerLane = kHeadDim / 32;
  float amax = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) amax = fmaxf(amax, fabsf(x[i]));
  amax = warp_max(amax);
  const float inverse = amax > 0 ? 448.0f / amax : 0.0f;
  LaneBytes<kHeadDim> stored;
  auto* bytes = reinterpret_cast<uint8_t*>(&stored);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) bytes[i] = __nv_cvt_float_to_fp8(x[i] * inverse, __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<LaneBytes<kHeadDim>*>(destination + lane * kPerLane) = stored;
  if (lane == 0) *scale = amax / 448.0f;
}

}  // namespace qinfer::cuda::qk_rope
