#include "backend/cpu/tensor_parallel_cpu_backend.h"

#include <algorithm>
#include <thread>

#include "model/tensor_shard.h"
#include "util/error.h"

namespace qinfer {

TensorParallelCpuBackend::TensorParallelCpuBackend(std::shared_ptr<const LoadedModel> model,
                                                   const BackendOptions& options)
    : model_(std::move(model)) {
  const int size = options.tensor_parallel_size;
  check_tensor_parallel_size(model_->config, size);
  group_ = std::make_shared<InProcessGroup>(size);
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

std::string TensorParallelCpuBackend::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

void TensorParallelCpuBackend::fail(const std::string& reason) {
  {
    std::lock_guard lock(failure_mutex_);
    // The first failure names the cause; ranks that throw only because the group stopped come after it.
    if (failure_.empty()) failure_ = reason;
  }
  group_->abort(reason);
}

std::vector<float> TensorParallelCpuBackend::run_ranks(const Batch& batch) {
  if (std::string failed = failure(); !failed.empty())
    throw Error(ErrorKind::kUnavailable, "tensor-parallel backend stopped after a rank failed: " + failed);
  // A malformed batch is refused here, before any rank starts, so that it does not end the group.
  validate_batch(batch, model_->config, kv_cache(), max_model_len(), /*multi_position_sampling=*/true);
  const size_t size = ranks_.size();
  std::vector<std::vector<float>> logits(size);
  const auto run_rank = [&](size_t r) {
    try {
      logits[r] = ranks_[r]->forward_logits(batch);
    } catch (const std::exception& e) {
      fail("rank " + std::to_string(r) + ": " + e.what());
    }
  };
  {
    std::vector<std::jthread> threads;
    try {
      for (size_t r = 1; r < size; ++r) threads.emplace_back(run_rank, r);
    } catch (const std::exception& e) {
      fail(std::string("cannot start the rank threads: ") + e.what());  // the started ranks stop at their collective
    }
    run_rank(0);
  }
  if (std::string failed = failure(); !failed.empty())
    throw Error(ErrorKind::kUnavailable, "tensor-parallel rank failed: " + failed);
  return std::move(logits[0]);
}

std::vector<float> TensorParallelCpuBackend::forward_logits(const Batch& batch) { return run_ranks(batch); }

std::vector<SampleResult> TensorParallelCpuBackend::step(const Batch& batch) {
  std::vector<float> logits = run_ranks(batch);
  if (batch.prepare_constraints) batch.prepare_constraints();
  return sample_batch_on_host(batch, logits, model_->config.vocab_size);
}

}  // namespace qinfer
