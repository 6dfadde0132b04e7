#include "backend/factory.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/tensor_parallel_cpu_backend.h"
#include "model/tensor_shard.h"
#include "util/error.h"
#include "util/logging.h"

#ifdef QINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/tensor_parallel_cuda_backend.h"
#endif

namespace qinfer {

namespace {

std::unique_ptr<Backend> create_cpu_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  if (options.tensor_parallel_same_device)
    throw Error(ErrorKind::kInvalidArgument,
                "--tensor-parallel-same-device needs --device cuda (it puts GPU ranks on "
                "one GPU)");
  if (options.tensor_parallel_size == 1) return std::make_unique<CpuBackend>(std::move(model), options);
  return std::make_unique<TensorParallelCpuBackend>(std::move(model), options);
}

#ifdef QINFER_HAVE_CUDA
std::unique_ptr<Backend> create_gpu_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  if (options.tensor_parallel_size == 1 && !options.tensor_parallel_same_device)
    return create_cuda_backend(std::move(model), options);
  return std::make_unique<TensorParallelCudaBackend>(std::move(model), options);
}
#endif

}  // namespace

std::unique_ptr<Backend> create_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    throw Error(ErrorKind::kInvalidArgument, "--device must be auto, cpu or cuda, got '" + options.device + "'");
  check_tensor_parallel_size(model->config, options.tensor_parallel_size);
  if (options.device == "cpu") return create_cpu_backend(std::move(model), options);
#ifdef QINFER_HAVE_CUDA
  std::string reason = cuda_unavailable_reason();
  if (reason.empty()) return create_gpu_backend(std::move(model), options);
  if (options.device == "cuda") throw Error(ErrorKind::kUnavailable, "--device cuda: " + reason);
  spdlog::warn("no usable GPU ({}); running on the CPU backend", reason);
#else
  if (options.device == "cuda")
    throw Error(ErrorKind::kUnavailable, "--device cuda: this qinfer was built without the CUDA backend");
#endif
  return create_cpu_backend(std::move(model), options);
}

}  // namespace qinfer
