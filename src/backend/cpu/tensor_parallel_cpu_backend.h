// Tensor parallelism on the CPU (--device cpu --tensor-parallel-size N): N CpuBackend ranks, each holding its
// shard_weights and its KV heads, run every step together from one thread per rank and combine their partial results
// through an InProcessCommunicator. Behind the Backend interface it is one backend with the model's config: the
// engine keeps one block table per sequence, and every rank's pool uses the same block ids. Its logits equal the
// unsharded CpuBackend's to fp32 rounding (the row-parallel sums are added in a different order). It is the CPU
// reference of the GPU design in docs/TENSOR_PARALLEL.md and what its tests run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/parallel/in_process_communicator.h"
#include "backend/parallel/rank_runner.h"

namespace qinfer {

class TensorParallelCpuBackend final : public Backend {
 public:
  // Splits `model` options.tensor_parallel_size ways (check_tensor_parallel_size: Error(kInvalidArgument) naming the
  // numbers; quantized linears: kUnsupported). --kv-cache-memory-bytes is per rank, as in vLLM; --threads is shared
  // out among the ranks.
  TensorParallelCpuBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);
  ~TensorParallelCpuBackend() override;

  std::string name() const override;
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override;
  int max_model_len() const override { return ranks_.front()->max_model_len(); }
  MemoryPlan memory_plan() const override;
  bool supports_multi_position_sampling() const override { return true; }
  std::string failure() const override;
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

  int tensor_parallel_size() const { return static_cast<int>(ranks_.size()); }
  // For tests: rank r's backend (its KV cache, its shard's config).
  const CpuBackend& rank(int r) const { return *ranks_[static_cast<size_t>(r)]; }

 private:
  // Runs the batch's forward on every rank (RankRunner); returns rank 0's logits.
  std::vector<float> run_ranks(const Batch& batch);

  std::shared_ptr<const LoadedModel> model_;
  std::shared_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<InProcessCommunicator>> communicators_;  // [N], one per rank
  std::vector<std::unique_ptr<CpuBackend>> ranks_;                     // [N]
  RankRunner runner_;  // aborts group_ at the first failure; once failed, every step is refused
};

}  // namespace qinfer
