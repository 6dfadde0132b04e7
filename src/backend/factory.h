// The backend factory (qinfer_backend): the one place that knows the concrete backends. Layers that only drive a
// backend (the engine) include backend.h and never link the CPU or CUDA code.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "model/qwen3_weights.h"

namespace qinfer {

// Creates the backend for options.device. "auto" takes CUDA when a usable GPU exists, else the CPU.
// Throws Error(kUnavailable) for "cuda" without a usable GPU (with the driver's reason).
std::unique_ptr<Backend> create_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);

}  // namespace qinfer
