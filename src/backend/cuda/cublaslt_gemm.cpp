#include "backend/cuda/cublaslt_gemm.h"

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

}  // namespace

CublasLtGemm::CublasLtGemm() : workspace_(kWorkspaceBytes, "cuBLASLt workspace") {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  for (auto& [shape, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  cublasLtDestroy(handle_);
}

// Column-major view: D^T [n, m] = W^T(op T of the column-major [k, n] weight) * X^T ([k, m]).
const CublasLtGemm::Plan& CublasLtGemm::plan_for(int m, int n, int k, bool y_fp32) {
  auto key = std::make_tuple(m, n, k, y_fp32);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan plan;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, y_fp32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace_bytes = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d, plan.d, preference, 1,
                                              &result, &found));
  cublasLtMatmulPreferenceDestroy(preference);
  QINFER_CHECK(found > 0, "cuBLASLt has no algorithm for this GEMM shape");
  plan.algo = result.algo;
  return plans_.emplace(key, plan).first->second;
}

void CublasLtGemm::matmul(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32, int m, int n,
                          int k, cudaStream_t stream) {
  const Plan& plan = plan_for(m, n, k, y_fp32);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, weight, plan.a, x, plan.b, &beta, y, plan.d, y, plan.d,
                              &plan.algo, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace qinfer::cuda
