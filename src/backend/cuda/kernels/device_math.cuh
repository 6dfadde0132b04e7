// Device helpers shared by the kernels: 16-byte bf16 vectors and warp/block reductions.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace qinfer::cuda {

// Eight bf16 values moved as one 16-byte access.
struct Bf16x8 {
  uint4 raw;
};

__device__ __forceinline__ void bf16x8_to_float(const Bf16x8& v, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&v.raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ Bf16x8 float_to_bf16x8(const float (&in)[8]) {
  Bf16x8 v;
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(&v.raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return v;
}

// SwiGLU of one element as HF computes act_fn(gate) * up in bf16: silu is rounded to bf16 before the product (the
// caller rounds the product when it stores it).
__device__ __forceinline__ float swiglu(float gate, float up) {
  const float silu = __bfloat162float(__float2bfloat16(gate / (1.0f + __expf(-gate))));
  return silu * up;
}

// SwiGLU of a linear's fp32 gate and up sums: HF's linear outputs are bf16 before the activation reads them.
__device__ __forceinline__ float swiglu_of_sums(float gate, float up) {
  return swiglu(__bfloat162float(__float2bfloat16(gate)), __bfloat162float(__float2bfloat16(up)));
}

// A linear's output element, stored as the output's type.
__device__ __forceinline__ void store_output(float value, __nv_bfloat16* y) { *y = __float2bfloat16(value); }
__device__ __forceinline__ void store_output(float value, float* y) { *y = value; }

// Read-only 16-byte load that bypasses L1 allocation: for data streamed once (weights, KV).
__device__ __forceinline__ uint4 load_streaming(const void* ptr) { return __ldcs(reinterpret_cast<const uint4*>(ptr)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds one float per warp (32 suffice).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < num_warps; ++w) total += scratch[w];
  return total;
}

}  // namespace qinfer::cuda
