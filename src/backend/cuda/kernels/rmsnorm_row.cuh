// The second half of the RMSNorm kernels that hold a row in registers (fused_add_rmsnorm.cu,
// fused_allreduce_add_rmsnorm.cu): one block of kRmsNormThreads threads per row, each thread with up to
// kRmsNormMaxVectorsPerThread vectors of 8 values; HF Qwen3's math: normalise in fp32, round to bf16, multiply by the
// weight in bf16. One definition, so that the fused all-reduce path writes the unfused path's bits.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/kernels/device_math.cuh"

namespace qinfer::cuda {

inline constexpr int kRmsNormThreads = 256;
inline constexpr int kRmsNormMaxVectorsPerThread = 4;  // hidden up to 8192

// The element index of this thread's vector v of a row.
__device__ __forceinline__ int rmsnorm_vector_index(int v) { return (threadIdx.x + v * kRmsNormThreads) * 8; }

// out[hidden] = bf16(values * rsqrt(mean(values²) + eps)) * weight, where this thread holds values[v] and weight[v]
// (its vectors: rmsnorm_vector_index) and sum_squares is its share of the row's sum of squares.
__device__ __forceinline__ void write_rmsnorm_row(const float (&values)[kRmsNormMaxVectorsPerThread][8],
                                                  float sum_squares, const uint4 (&weight)[kRmsNormMaxVectorsPerThread],
                                                  __nv_bfloat16* out, int hidden, float eps, float* scratch) {
  const float inv_rms = rsqrtf(block_sum(sum_squares, scratch) / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int v = 0; v < kRmsNormMaxVectorsPerThread; ++v) {
    const int i = rmsnorm_vector_index(v);
    if (i < hidden) {
      Bf16x8 w;
      w.raw = weight[v];
      float wf[8], y[8];
      bf16x8_to_float(w, wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) y[j] = __bfloat162float(__float2bfloat16(values[v][j] * inv_rms)) * wf[j];
      *reinterpret_cast<uint4*>(out + i) = float_to_bf16x8(y).raw;
    }
  }
}

}  // namespace qinfer::cuda
