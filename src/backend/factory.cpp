#include "backend/factory.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "util/error.h"
#include "util/logging.h"

#ifdef QINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace qinfer {

std::unique_ptr<Backend> create_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    throw Error(ErrorKind::kInvalidArgument, "--device must be auto, cpu or cuda, got '" + options.device + "'");
  if (options.device == "cpu") return std::make_unique<CpuBackend>(std::move(model), options);
#ifdef QINFER_HAVE_CUDA
  std::string reason = cuda_unavailable_reason();
  if (reason.empty()) return create_cuda_backend(std::move(model), options);
  if (options.device == "cuda") throw Error(ErrorKind::kUnavailable, "--device cuda: " + reason);
  spdlog::warn("no usable GPU ({}); running on the CPU backend", reason);
#else
  if (options.device == "cuda")
    throw Error(ErrorKind::kUnavailable, "--device cuda: this qinfer was built without the CUDA backend");
#endif
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace qinfer
