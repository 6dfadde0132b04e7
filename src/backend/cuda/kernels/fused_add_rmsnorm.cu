#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxVectorsPerThread = 4;  // hidden up to 8192

// One block per row; each thread keeps its (up to) 4 vectors of 8 values in registers between the two passes.
__global__ void __launch_bounds__(kThreads) fused_add_rmsnorm_kernel(FusedAddRmsNormParams p) {
  __shared__ float scratch[32];
  allow_dependents();
  // The row index (uploaded with the batch) and the norm weight are written by no kernel of the step: read them
  // before waiting for the previous kernel, so that the only loads after the wait are the residual and delta.
  const int row = p.row_index ? p.row_index[blockIdx.x] : blockIdx.x;
  uint4 weight[kMaxVectorsPerThread];
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int i = (threadIdx.x + v * kThreads) * 8;
    if (i < p.hidden) weight[v] = *reinterpret_cast<const uint4*>(p.weight + i);
  }
  wait_for_producer();
  float* residual = p.residual + static_cast<int64_t>(row) * p.hidden;
  const __nv_bfloat16* delta = p.delta ? p.delta + static_cast<int64_t>(row) * p.hidden : nullptr;
  const float* delta_f32 = p.delta_f32 ? p.delta_f32 + static_cast<int64_t>(row) * p.hidden : nullptr;
  float values[kMaxVectorsPerThread][8];
  float sum_squares = 0;
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int i = (threadIdx.x + v * kThreads) * 8;
    if (i < p.hidden) {
      float4 a = reinterpret_cast<const float4*>(residual + i)[0];
      float4 b = reinterpret_cast<const float4*>(residual + i)[1];
      float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      if (delta || delta_f32) {
        float df[8];
        if (delta_f32) {
          const float4 d0 = reinterpret_cast<const float4*>(delta_f32 + i)[0];
          const float4 d1 = reinterpret_cast<const float4*>(delta_f32 + i)[1];
          df[0] = d0.x, df[1] = d0.y, df[2] = d0.z, df[3] = d0.w, df[4] = d1.x, df[5] = d1.y, df[6] = d1.z,
          df[7] = d1.w;
        } else {
          Bf16x8 d;
          d.raw = *reinterpret_cast<const uint4*>(delta + i);
          bf16x8_to_float(d, df);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] += df[j];
        if (p.write_residual) {
          reinterpret_cast<float4*>(residual + i)[0] = make_float4(x[0], x[1], x[2], x[3]);
          reinterpret_cast<float4*>(residual + i)[1] = make_float4(x[4], x[5], x[6], x[7]);
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        values[v][j] = x[j];
        sum_squares += x[j] * x[j];
      }
    }
  }
  const float inv_rms = rsqrtf(block_sum(sum_squares, scratch) / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + static_cast<int64_t>(blockIdx.x) * p.hidden;
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int i = (threadIdx.x + v * kThreads) * 8;
    if (i < p.hidden) {
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

}  // namespace

void launch_fused_add_rmsnorm(const FusedAddRmsNormParams& params, const KernelStream& stream) {
  QINFER_CHECK(params.hidden % 8 == 0 && params.hidden <= kThreads * 8 * kMaxVectorsPerThread);
  if (params.num_rows == 0) return;
  launch_dependent(fused_add_rmsnorm_kernel, params.num_rows, kThreads, 0, stream, params);
}

}  // namespace qinfer::cuda
