// Residual add + RMSNorm: residual += delta (fp32 stream, bf16 or fp32 delta), out = bf16(rmsnorm(residual)) * weight.
// Math as HF Qwen3: normalise in fp32, round to bf16, then multiply by the weight in bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct FusedAddRmsNormParams {
  float* residual = nullptr;              // [num_rows (or more when gathered), hidden]
  const __nv_bfloat16* delta = nullptr;   // [same rows, hidden]; null: no add
  const float* delta_f32 = nullptr;       // [same rows, hidden] fp32 instead of delta (a tensor-parallel all-reduce)
  const __nv_bfloat16* weight = nullptr;  // [hidden]
  __nv_bfloat16* out = nullptr;           // [num_rows, hidden]
  const int32_t* row_index = nullptr;     // [num_rows] rows of residual/delta to read; null: identity
  bool write_residual = true;             // false: the sum is used for the norm but not stored (final norm)
  int num_rows = 0;
  int hidden = 0;  // multiple of 8, at most 8 * 1024 * kMaxVectorsPerThread
  float eps = 1e-6f;
};

void launch_fused_add_rmsnorm(const FusedAddRmsNormParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
