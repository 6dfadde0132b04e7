#include "backend/cuda/cublaslt_gemm.h"

#include <bit>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

}  // namespace

CublasLtGemm::CublasLtGemm() : workspace_(kWorkspaceBytes, "cuBLASLt workspace") {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  for (auto& [shape, op] : operations_) {
    cublasLtMatrixLayoutDestroy(op.weight);
    cublasLtMatmulDescDestroy(op.desc);
  }
  cublasLtDestroy(handle_);
}

int CublasLtGemm::bucket_of(int m) { return m <= 16 ? 16 : static_cast<int>(std::bit_ceil(static_cast<unsigned>(m))); }

// Column-major view: y^T [n, m] = W^T (op T of the column-major [k, n] weight) * x^T ([k, m]).
CublasLtGemm::ActivationLayouts::ActivationLayouts(int m, int n, int k, bool y_fp32) {
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&x, CUDA_R_16BF, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&y, y_fp32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));
}

CublasLtGemm::ActivationLayouts::~ActivationLayouts() {
  cublasLtMatrixLayoutDestroy(x);
  cublasLtMatrixLayoutDestroy(y);
}

const CublasLtGemm::Operation& CublasLtGemm::operation_for(int n, int k, bool y_fp32) {
  const auto key = std::make_tuple(n, k, y_fp32);
  auto it = operations_.find(key);
  if (it != operations_.end()) return it->second;
  Operation op;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&op.weight, CUDA_R_16BF, k, n, k));
  return operations_.emplace(key, op).first->second;
}

cublasLtMatmulAlgo_t CublasLtGemm::heuristic(const Operation& op, const ActivationLayouts& layouts) {
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace_bytes = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, op.desc, op.weight, layouts.x, layouts.y, layouts.y, preference,
                                              1, &result, &found));
  cublasLtMatmulPreferenceDestroy(preference);
  QINFER_CHECK(found > 0, "cuBLASLt has no algorithm for this GEMM shape");
  return result.algo;
}

const cublasLtMatmulAlgo_t& CublasLtGemm::algo_for(int m, int n, int k, bool y_fp32, const Operation& op,
                                                   const ActivationLayouts& layouts) {
  const ShapeKey exact{m, n, k, y_fp32};
  if (auto it = exact_algos_.find(exact); it != exact_algos_.end()) return it->second;
  const int bucket = bucket_of(m);
  const ShapeKey bucket_key{bucket, n, k, y_fp32};
  auto it = bucket_algos_.find(bucket_key);
  if (it == bucket_algos_.end())
    it = bucket_algos_.emplace(bucket_key, heuristic(op, ActivationLayouts(bucket, n, k, y_fp32))).first;
  if (m == bucket || checked_.contains(exact)) return it->second;
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status =
      cublasLtMatmulAlgoCheck(handle_, op.desc, op.weight, layouts.x, layouts.y, layouts.y, &it->second, &check);
  if (status == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= kWorkspaceBytes) {
    checked_.insert(exact);
    return it->second;
  }
  return exact_algos_.emplace(exact, heuristic(op, layouts)).first->second;
}

void CublasLtGemm::matmul(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32, int m, int n,
                          int k, cudaStream_t stream) {
  const Operation& op = operation_for(n, k, y_fp32);
  const ActivationLayouts layouts(m, n, k, y_fp32);
  const cublasLtMatmulAlgo_t& algo = algo_for(m, n, k, y_fp32, op, layouts);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, op.desc, &alpha, weight, op.weight, x, layouts.x, &beta, y, layouts.y, y,
                              layouts.y, &algo, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace qinfer::cuda
