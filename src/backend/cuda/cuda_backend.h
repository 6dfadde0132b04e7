// The CUDA backend: Qwen3 bf16 forward over a paged KV cache on one GPU, with sampling on the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace qinfer {

// Uploads the weights, plans activations and sizes the KV cache from options.gpu_memory_utilization (or
// options.kv_cache_bytes when set). Throws Error(kOutOfMemory) with the numbers when the model or one
// max_model_len sequence does not fit, Error(kUnavailable) without a usable GPU.
std::unique_ptr<Backend> create_cuda_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);

// Empty when a usable GPU exists; else the driver's reason (no device, driver too old for this build, ...).
std::string cuda_unavailable_reason();

// CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 when CUDA is not usable.
int cuda_device_count();

// Bytes of device memory in use on the current GPU (all allocations of this process and others), for reports.
int64_t cuda_memory_in_use_bytes();

}  // namespace qinfer
