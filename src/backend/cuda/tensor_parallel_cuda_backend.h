// Tensor parallelism on GPUs (--device cuda --tensor-parallel-size N, docs/TENSOR_PARALLEL.md): N CUDA backend ranks,
// each with its shard_weights on its GPU (q/k/v and gate/up fused per rank from its slices), its KV pool of its own
// KV heads and its communicator, run every step together from one thread per rank, as the CPU ranks do
// (TensorParallelCpuBackend). Behind the Backend interface it is one backend with the model's config: one block table
// per sequence, every rank's pool with the same block ids; rank 0 samples from the gathered logits.
//
// The ranks talk through NCCL, one GPU per rank; with options.tensor_parallel_same_device every rank runs on GPU 0
// through the SameDeviceCommunicator (eager: no CUDA graphs), the tests' way of running a split on one GPU.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/parallel/communicator.h"
#include "backend/parallel/rank_runner.h"

namespace qinfer {

class TensorParallelCudaBackend final : public Backend {
 public:
  // Refuses, before a weight is touched: sizes that do not divide the model (Error(kInvalidArgument)), quantized
  // linears (kUnsupported), more ranks than GPUs and GPUs without peer access (kUnavailable, naming the devices).
  // --kv-cache-memory-bytes is per rank; ranks after the first take rank 0's block count. In the same-device mode
  // each rank gets 1/N of --gpu-memory-utilization.
  TensorParallelCudaBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);
  ~TensorParallelCudaBackend() override;

  std::string name() const override;
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override;
  int max_model_len() const override { return ranks_.front()->max_model_len(); }
  MemoryPlan memory_plan() const override;
  bool supports_multi_position_sampling() const override { return true; }
  std::string failure() const override { return runner_.failure(); }
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

  int tensor_parallel_size() const { return static_cast<int>(ranks_.size()); }
  // The ranks' all-reduce alone, at a step's size: `elements` fp32 values summed over the ranks `iterations` times on
  // a stream of each rank after one untimed round, as the layers' all-reduces are. Seconds per all-reduce, the
  // slowest rank's (what `bench latency` reports per step).
  double time_all_reduce(size_t elements, int iterations);
  // For tests: rank r's backend (its KV pool, its shard's config).
  const Backend& rank(int r) const { return *ranks_[static_cast<size_t>(r)]; }

 private:
  // Validates the batch once, then runs `work(r)` on every rank's thread with the rank's device current.
  void run_ranks(const Batch& batch, const std::function<void(size_t rank)>& work);

  std::shared_ptr<const LoadedModel> model_;
  std::vector<int> devices_;                                  // [N]: rank r's GPU
  std::vector<std::unique_ptr<Communicator>> communicators_;  // [N]
  std::vector<std::unique_ptr<Backend>> ranks_;               // [N]: CUDA backends of the ranks' shards
  std::function<void(const std::string&)> abort_communicators_;
  RankRunner runner_;
};

}  // namespace qinfer
