#include "backend/cuda/tensor_parallel_cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/same_device_communicator.h"
#include "backend/cuda/tensor_parallel_rank.h"
#include "backend/parallel/nccl_communicator.h"
#include "backend/parallel/rank_devices.h"
#include "model/tensor_shard.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer {

namespace {

bool can_access_peer(int device, int peer) {
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

}  // namespace

TensorParallelCudaBackend::TensorParallelCudaBackend(std::shared_ptr<const LoadedModel> model,
                                                     const BackendOptions& options)
    : model_(std::move(model)), runner_([this](const std::string& reason) { abort_communicators_(reason); }) {
  const int size = options.tensor_parallel_size;
  check_tensor_parallel_size(model_->config, size);
  devices_ = tensor_parallel_devices(size, options.tensor_parallel_same_device, cuda_device_count(), can_access_peer);
  // Every shard first: a quantized checkpoint is refused before anything is allocated on a GPU.
  std::vector<ShardSpec> specs;
  std::vector<std::shared_ptr<const LoadedModel>> shards;
  for (int r = 0; r < size; ++r) {
    specs.push_back(shard_spec(model_->config, r, size));
    shards.push_back(std::make_shared<const LoadedModel>(shard_weights(model_, specs.back())));
  }

  if (options.tensor_parallel_same_device) {
    ScopedCudaDevice on_device(devices_.front());
    auto group = std::make_shared<cuda::SameDeviceGroup>(size);
    for (int r = 0; r < size; ++r) communicators_.push_back(std::make_unique<cuda::SameDeviceCommunicator>(group, r));
    abort_communicators_ = [group](const std::string& reason) { group->abort(reason); };
  } else {
    std::vector<std::unique_ptr<NcclCommunicator>> nccl = make_nccl_communicators(devices_);
    std::vector<NcclCommunicator*> aborted;
    for (auto& communicator : nccl) {
      aborted.push_back(communicator.get());
      communicators_.push_back(std::move(communicator));
    }
    abort_communicators_ = [aborted](const std::string&) {
      for (NcclCommunicator* communicator : aborted) communicator->abort();
    };
  }

  BackendOptions rank_options = options;
  if (options.tensor_parallel_same_device) {
    rank_options.gpu_memory_utilization /= size;  // the ranks share the device's budget
    rank_options.cuda_graphs = false;             // the same-device collectives wait on the host
  }
  for (int r = 0; r < size; ++r) {
    ScopedCudaDevice on_device(devices_[static_cast<size_t>(r)]);
    // Every rank's pool has the same block ids: the ranks after the first take its count.
    if (r > 0 && options.kv_cache_num_blocks == 0)
      rank_options.kv_cache_num_blocks = ranks_.front()->kv_cache().num_blocks;
    ranks_.push_back(create_cuda_rank_backend(
        std::move(shards[static_cast<size_t>(r)]), rank_options,
        cuda::CudaTensorParallelRank{specs[static_cast<size_t>(r)], communicators_[static_cast<size_t>(r)].get()}));
  }
  spdlog::info("{}", name());
}

TensorParallelCudaBackend::~TensorParallelCudaBackend() {
  // Each rank's streams and buffers are released with its device current, before the communicators they use.
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (cudaSetDevice(devices_[r]) == cudaSuccess) ranks_[r].reset();
  }
  ranks_.clear();
  if (!devices_.empty()) cudaSetDevice(devices_.front());
}

std::string TensorParallelCudaBackend::name() const {
  std::string ranks;
  for (const auto& rank : ranks_) ranks += (ranks.empty() ? "" : ", ") + rank->name();
  return "cuda (tensor parallel, " + std::to_string(ranks_.size()) + " ranks: " + ranks + ")";
}

KvCacheShape TensorParallelCudaBackend::kv_cache() const {
  // Every rank has the same blocks, each holding its own KV heads.
  KvCacheShape shape = ranks_.front()->kv_cache();
  shape.bytes *= static_cast<int64_t>(ranks_.size());
  return shape;
}

MemoryPlan TensorParallelCudaBackend::memory_plan() const {
  MemoryPlan plan;
  const bool same_device = devices_.size() > 1 && devices_[0] == devices_[1];
  for (const auto& rank : ranks_) {
    const MemoryPlan part = rank->memory_plan();
    const auto add = [](std::optional<int64_t>& total, const std::optional<int64_t>& value) {
      if (value) total = total.value_or(0) + *value;
    };
    if (!same_device || !plan.device_total) add(plan.device_total, part.device_total);
    add(plan.budget, part.budget);
    add(plan.weights, part.weights);
    add(plan.activations, part.activations);
    add(plan.graphs, part.graphs);
  }
  plan.kv = kv_cache();
  return plan;
}

void TensorParallelCudaBackend::run_ranks(const Batch& batch, const std::function<void(size_t rank)>& work) {
  if (failure().empty())  // a stopped group is refused by the runner, naming why
    // A malformed batch is refused here, before any rank starts, so that it does not end the group.
    validate_batch(batch, model_->config, kv_cache(), max_model_len(), /*multi_position_sampling=*/true);
  runner_.run(ranks_.size(), [&](size_t r) {
    CUDA_CHECK(cudaSetDevice(devices_[r]));
    work(r);
  });
}

std::vector<SampleResult> TensorParallelCudaBackend::step(const Batch& batch) {
  std::vector<SampleResult> results;
  run_ranks(batch, [&](size_t r) {
    std::vector<SampleResult> rank_results = ranks_[r]->step(batch);
    if (r == 0) results = std::move(rank_results);
  });
  return results;
}

double TensorParallelCudaBackend::time_all_reduce(size_t elements, int iterations) {
  QINFER_CHECK(elements > 0 && iterations > 0);
  std::vector<double> seconds(ranks_.size(), 0.0);
  runner_.run(ranks_.size(), [&](size_t r) {
    CUDA_CHECK(cudaSetDevice(devices_[r]));
    cuda::DeviceBuffer buffer(elements * sizeof(float), "all-reduce timing");
    CUDA_CHECK(cudaMemset(buffer.data(), 0, buffer.bytes()));
    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    Communicator& communicator = *communicators_[r];
    communicator.all_reduce_sum(buffer.data(), elements, CommDtype::kF32, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) communicator.all_reduce_sum(buffer.data(), elements, CommDtype::kF32, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
    CUDA_CHECK(cudaStreamDestroy(stream));
  });
  return *std::max_element(seconds.begin(), seconds.end());
}

std::vector<float> TensorParallelCudaBackend::forward_logits(const Batch& batch) {
  std::vector<float> logits;
  run_ranks(batch, [&](size_t r) {
    std::vector<float> rank_logits = ranks_[r]->forward_logits(batch);
    if (r == 0) logits = std::move(rank_logits);
  });
  return logits;
}

}  // namespace qinfer
