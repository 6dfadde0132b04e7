// Large-M linear layers (prefill, batched decode) through cuBLASLt: y[m, n] = x[m, k] * weight[n, k]^T, bf16 inputs,
// fp32 accumulation, bf16 or fp32 output.
//
// cuBLASLt's algorithm heuristic costs on the order of a millisecond per call, and a serving engine sees a different m
// (tokens in the step) nearly every step. So the algorithm is chosen once per bucket of m (16, then powers of two), at
// the bucket's upper end, and reused for every m in the bucket after a one-time check that it supports that exact
// shape. The backend times the heuristic's first candidates for every bucket at load time (tune()), which chooses them
// all up front: the first one is 3-6 % slower than the best on the Qwen3-4B prefill shapes, and the 64-sequence
// decode step is 3 % faster with the timed choice (docs/CUDA_DESIGN.md, "cuBLASLt").
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm_tuning_cache.h"

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

  // The bucket whose algorithm serves m: 16 for m <= 16, else the next power of two.
  static int bucket_of(int m);

  // Times the heuristic's first few algorithms for this shape on these buffers (only y is written) and keeps the
  // fastest for m's bucket (call it with the bucket's upper end, or the largest m the caller will use). Synchronises
  // the stream. Returns the seconds per call of the heuristic's first choice and of the kept one. With a `cache`
  // that holds the shape, and cuBLASLt accepts its algorithm, that one is kept without timing (from_cache; one launch
  // loads its module); else the timed choice is stored in it.
  struct TuneResult {
    double first_choice_seconds = 0, chosen_seconds = 0;
    int candidates = 0, chosen = 0;
    bool from_cache = false;
  };
  TuneResult tune(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, bool y_fp32, int m, int n, int k,
                  cudaStream_t stream, GemmTuningCache* cache = nullptr);

  // The limit on the workspace of every algorithm used: part of a tuning cache's environment.
  static size_t workspace_bytes();

 private:
  using ShapeKey = std::tuple<int, int, int, bool>;  // m (or its bucket), n, k, y_fp32
  struct Operation {                                 // per (n, k, y_fp32): what does not depend on m
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t weight = nullptr;
  };
  // Layouts of x [m, k] and y [m, n] for one m; destroyed with the object.
  struct ActivationLayouts {
    ActivationLayouts(int m, int n, int k, bool y_fp32);
    ~ActivationLayouts();
    ActivationLayouts(const ActivationLayouts&) = delete;
    ActivationLayouts& operator=(const ActivationLayouts&) = delete;
    cublasLtMatrixLayout_t x = nullptr, y = nullptr;
  };

  const Operation& operation_for(int n, int k, bool y_fp32);
  cublasLtMatmulAlgo_t heuristic(const Operation& op, const ActivationLayouts& layouts);
  std::vector<cublasLtMatmulAlgo_t> heuristics(const Operation& op, const ActivationLayouts& layouts, int count);
  const cublasLtMatmulAlgo_t& algo_for(int m, int n, int k, bool y_fp32, const Operation& op,
                                       const ActivationLayouts& layouts);
  // Keeps `algo` for the bucket m (the upper end) and forgets which exact shapes its previous algorithm supported.
  void keep_bucket_algo(int m, int n, int k, bool y_fp32, const cublasLtMatmulAlgo_t& algo);
  // y = x · weightᵀ with `algo` on the stream (no check: tune() drops algorithms that fail to launch).
  cublasStatus_t launch(const Operation& op, const ActivationLayouts& layouts, const cublasLtMatmulAlgo_t& algo,
                        const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, bool>, Operation> operations_;
  std::map<ShapeKey, cublasLtMatmulAlgo_t> bucket_algos_;  // keyed by bucket
  std::map<ShapeKey, cublasLtMatmulAlgo_t> exact_algos_;   // m whose bucket algorithm failed the check
  std::set<ShapeKey> checked_;                             // exact shapes the bucket algorithm supports
};

}  // namespace qinfer::cuda
