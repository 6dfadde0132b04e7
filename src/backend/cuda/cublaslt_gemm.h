// Large-M linear layers (prefill) through cuBLASLt: y[m, n] = x[m, k] * weight[n, k]^T, bf16 inputs, fp32
// accumulation, bf16 or fp32 output. Plans are cached per shape.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "backend/cuda/device_buffer.h"

namespace qinfer::cuda {

class CublasLtGemm {
 public:
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // x [m, k], weight [n, k], y [m, n] (fp32 when y_fp32, else bf16). Not thread-safe: one stream at a time.
  void matmul(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32, int m, int n, int k,
              cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan_for(int m, int n, int k, bool y_fp32);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace qinfer::cuda
