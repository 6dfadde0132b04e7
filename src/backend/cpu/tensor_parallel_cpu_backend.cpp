#include "backend/cpu/tensor_parallel_cpu_backend.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "model/tensor_shard.h"
#include "util/error.h"

namespace qinfer {

namespace {

int checked_tensor_parallel_size(const ModelConfig& config, int size) {
  check_tensor_parallel_size(config, size);
  return size;
}

}  // namespace

TensorParallelCpuBackend::TensorParallelCpuBackend(std::shared_ptr<const LoadedModel> model,
                                                   const BackendOptions& options)
    : model_(std::move(model)),
      group_(
          std::make_shared<InProcessGroup>(checked_tensor_parallel_size(model_->config, options.tensor_parallel_size))),
      runner_([group = group_](const std::string& reason) { group->abort(reason); }) {
  const int size = options.tensor_parallel_size;
  BackendOptions rank_options = options;
  const int threads = options.num_threads > 0 ? options.num_threads
                                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  rank_options.num_threads = std::max(1, threads / size);
  for (int r = 0; r < size; ++r) {
    const ShardSpec spec = shard_spec(model_->config, r, size);
    communicators_.push_back(std::make_unique<InProcessCommunicator>(group_, r));
    auto shard = std::make_shared<const LoadedModel>(shard_weights(model_, spec));
    ranks_.push_back(std::make_unique<CpuBackend>(std::move(shard), rank_options,
                                                  CpuTensorParallelRank{spec, communicators_.back().get()}));
  }
}

TensorParallelCpuBackend::~TensorParallelCpuBackend() = default;

std::string TensorParallelCpuBackend::name() const {
  return "cpu (tensor parallel, " + std::to_string(ranks_.size()) + " ranks)";
}

KvCacheShape TensorParallelCpuBackend::kv_cache() const {
  // Every rank has the same blocks, each holding its own KV heads.
  KvCacheShape shape = ranks_.front()->kv_cache();
  shape.bytes *= static_cast<int64_t>(ranks_.size());
  return shape;
}

MemoryPlan TensorParallelCpuBackend::memory_plan() const {
  MemoryPlan plan;
  plan.weights = 0;
  plan.activations = 0;
  for (const auto& rank : ranks_) {
    const MemoryPlan part = rank->memory_plan();
    *plan.weights += part.weights.value_or(0);
    *plan.activations += part.activations.value_or(0);
  }
  plan.kv = kv_cache();
  return plan;
}

std::string TensorParallelCpuBackend::failure() const { return runner_.failure(); }

std::vector<float> TensorParallelCpuBackend::run_ranks(const Batch& batch) {
  if (std::string failed = failure(); failed.empty())  // a stopped group is refused by the runner, naming why
    // A malformed batch is refused here, before any rank starts, so that it does not end the group.
    validate_batch(batch, model_->config, kv_cache(), max_model_len(), /*multi_position_sampling=*/true);
  std::vector<std::vector<float>> logits(ranks_.size());
  runner_.run(ranks_.size(), [&](size_t r) { logits[r] = ranks_[r]->forward_logits(batch); });
  return std::move(logits[0]);
}

std::vector<float> TensorParallelCpuBackend::forward_logits(const Batch& batch) { return run_ranks(batch); }

std::vector<SampleResult> TensorParallelCpuBackend::step(const Batch& batch) {
  std::vector<float> logits = run_ranks(batch);
  if (batch.prepare_constraints) batch.prepare_constraints();
  return sample_batch_on_host(batch, logits, model_->config.vocab_size);
}

}  // namespace qinfer
