#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kTuneCandidates = 8;
constexpr int kTuneRounds = 7;

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

size_t CublasLtGemm::workspace_bytes() { return kWorkspaceBytes; }

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

std::vector<cublasLtMatmulAlgo_t> CublasLtGemm::heuristics(const Operation& op, const ActivationLayouts& layouts,
                                                           int count) {
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  size_t workspace_bytes = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, op.desc, op.weight, layouts.x, layouts.y, layouts.y, preference,
                                              count, results.data(), &found));
  cublasLtMatmulPreferenceDestroy(preference);
  QINFER_CHECK(found > 0, "cuBLASLt has no algorithm for this GEMM shape");
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < found; ++i) algos.push_back(results[static_cast<size_t>(i)].algo);
  return algos;
}

cublasLtMatmulAlgo_t CublasLtGemm::heuristic(const Operation& op, const ActivationLayouts& layouts) {
  return heuristics(op, layouts, 1).front();
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

cublasStatus_t CublasLtGemm::launch(const Operation& op, const ActivationLayouts& layouts,
                                    const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* x,
                                    const __nv_bfloat16* weight, void* y, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, op.desc, &alpha, weight, op.weight, x, layouts.x, &beta, y, layouts.y, y, layouts.y,
                        &algo, workspace_.data(), workspace_.bytes(), stream);
}

void CublasLtGemm::matmul(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32, int m, int n,
                          int k, cudaStream_t stream) {
  const Operation& op = operation_for(n, k, y_fp32);
  const ActivationLayouts layouts(m, n, k, y_fp32);
  CUBLAS_CHECK(launch(op, layouts, algo_for(m, n, k, y_fp32, op, layouts), x, weight, y, stream));
}

void CublasLtGemm::keep_bucket_algo(int m, int n, int k, bool y_fp32, const cublasLtMatmulAlgo_t& algo) {
  bucket_algos_.insert_or_assign(ShapeKey{m, n, k, y_fp32}, algo);
  // Shapes checked against the bucket's previous algorithm are checked again on their next use.
  std::erase_if(checked_, [&](const ShapeKey& key) {
    const auto& [key_m, key_n, key_k, key_fp32] = key;
    return key_n == n && key_k == k && key_fp32 == y_fp32 && bucket_of(key_m) == m;
  });
}

CublasLtGemm::TuneResult CublasLtGemm::tune(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32,
                                            int m, int n, int k, cudaStream_t stream, GemmTuningCache* cache) {
  const Operation& op = operation_for(n, k, y_fp32);
  const ActivationLayouts layouts(m, n, k, y_fp32);
  const auto run = [&](const cublasLtMatmulAlgo_t& algo) { return launch(op, layouts, algo, x, weight, y, stream); };
  static_assert(sizeof(cublasLtMatmulAlgo_t::data) == sizeof(GemmAlgoWords));
  const GemmShape shape{.m = m, .n = n, .k = k, .y_fp32 = y_fp32};
  if (cache != nullptr) {
    if (const std::optional<GemmAlgoWords> words = cache->find(shape)) {
      cublasLtMatmulAlgo_t algo{};
      std::memcpy(algo.data, words->data(), sizeof(algo.data));
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(handle_, op.desc, op.weight, layouts.x, layouts.y, layouts.y, &algo, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= kWorkspaceBytes && run(algo) == CUBLAS_STATUS_SUCCESS) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        keep_bucket_algo(m, n, k, y_fp32, algo);
        return {.from_cache = true};
      }
      cache->erase(shape);
    }
  }
  const std::vector<cublasLtMatmulAlgo_t> candidates = heuristics(op, layouts, kTuneCandidates);
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  // The warm-up launch loads each candidate's module; candidates that fail to launch are dropped.
  std::vector<size_t> usable;
  for (size_t c = 0; c < candidates.size(); ++c)
    if (run(candidates[c]) == CUBLAS_STATUS_SUCCESS) usable.push_back(c);
  QINFER_CHECK(!usable.empty(), "no cuBLASLt candidate algorithm launches for this GEMM shape");
  // Rounds over all candidates, so that clock and temperature drift during the sweep touch every candidate alike;
  // a candidate's time is its median round.
  std::vector<std::vector<float>> samples(candidates.size());
  for (int round = 0; round < kTuneRounds; ++round)
    for (size_t c : usable) {
      CUDA_CHECK(cudaEventRecord(start, stream));
      CUBLAS_CHECK(run(candidates[c]));
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      samples[c].push_back(ms);
    }
  TuneResult result;
  result.candidates = static_cast<int>(candidates.size());
  for (size_t c : usable) {
    std::sort(samples[c].begin(), samples[c].end());
    const double seconds = samples[c][samples[c].size() / 2] * 1e-3;
    if (c == usable.front()) result.first_choice_seconds = seconds;
    if (result.chosen_seconds == 0 || seconds < result.chosen_seconds) {
      result.chosen_seconds = seconds;
      result.chosen = static_cast<int>(c);
    }
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  const cublasLtMatmulAlgo_t& chosen = candidates[static_cast<size_t>(result.chosen)];
  keep_bucket_algo(m, n, k, y_fp32, chosen);
  if (cache != nullptr) {
    GemmAlgoWords words{};
    std::memcpy(words.data(), chosen.data, sizeof(chosen.data));
    cache->store(shape, words);
  }
  return result;
}

}  // namespace qinfer::cuda
