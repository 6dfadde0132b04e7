// Decode-shaped linear layer: y[m, n] = sum_k x[m, k] * weight[n, k] for 1..16 rows of x. The weight is streamed
// once with 16-byte loads and every loaded vector is used for all rows; this is the roofline kernel of decode.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

constexpr int kGemvMaxRows = 16;

struct GemvParams {
  const __nv_bfloat16* x = nullptr;       // [num_rows, k]
  const __nv_bfloat16* weight = nullptr;  // [n, k]
  void* y = nullptr;                      // [num_rows, n], bf16 or fp32 (y_fp32)
  bool y_fp32 = false;
  int num_rows = 0;  // 1..kGemvMaxRows
  int n = 0;
  int k = 0;  // multiple of 8; x and weight 16-byte aligned
  // weight = [gate; up] ([n/2 + n/2, k]): y = silu(x·gateᵀ) * (x·upᵀ), [num_rows, n/2] bf16, rounded as HF does.
  bool swiglu = false;
};

void launch_gemv(const GemvParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
