// The CUDA backend: Qwen3 bf16 forward over a paged KV cache on one GPU, with sampling on the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace qinfer {

namespace cuda {
struct CudaTensorParallelRank;  // tensor_parallel_rank.h
}

// Uploads the weights, plans activations and sizes the KV cache from options.gpu_memory_utilization (or
// options.kv_cache_bytes when set). Throws Error(kOutOfMemory) with the numbers when the model or one
// max_model_len sequence does not fit, Error(kUnavailable) without a usable GPU.
std::unique_ptr<Backend> create_cuda_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);

// One rank of a tensor-parallel group (tensor_parallel_cuda_backend.h), on the current device: `shard` is the rank's
// shard_weights. Its step() and forward_logits() make the rank's collectives, so every rank of the group calls them
// with the same batch, each from its own thread with its device current; only rank 0 samples (the other ranks' step()
// returns no results). forward_logits() returns the whole vocabulary's logits on every rank.
std::unique_ptr<Backend> create_cuda_rank_backend(std::shared_ptr<const LoadedModel> shard,
                                                  const BackendOptions& options,
                                                  const cuda::CudaTensorParallelRank& rank);

// Empty when a usable GPU exists; else the driver's reason (no device, driver too old for this build, ...).
std::string cuda_unavailable_reason();

// CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 when CUDA is not usable.
int cuda_device_count();

// Bytes of device memory in use on the current GPU (all allocations of this process and others), for reports.
int64_t cuda_memory_in_use_bytes();

}  // namespace qinfer
