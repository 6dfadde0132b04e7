#include "backend/factory.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/tensor_parallel_cpu_backend.h"
#include "model/tensor_shard.h"
#include "util/error.h"
#include "util/logging.h"

#ifdef QINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace qinfer {

namespace {

std::unique_ptr<Backend> create_cpu_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  if (options.tensor_parallel_size == 1) return std::make_unique<CpuBackend>(std::move(model), options);
  return std::make_unique<TensorParallelCpuBackend>(std::move(model), options);
}

#ifdef QINFER_HAVE_CUDA
// The CUDA backend runs one GPU: more ranks than GPUs, or any split, are refused before anything is allocated.
void check_cuda_tensor_parallel_size(const BackendOptions& options) {
  if (options.tensor_parallel_size == 1) return;
  const std::string flag = "--tensor-parallel-size " + std::to_string(options.tensor_parallel_size);
  const int gpus = cuda_device_count();
  if (options.tensor_parallel_size > gpus)
    throw Error(ErrorKind::kUnavailable, flag + " needs " + std::to_string(options.tensor_parallel_size) + " GPUs; " +
                                             std::to_string(gpus) + " visible (CUDA_VISIBLE_DEVICES)");
  throw Error(ErrorKind::kUnsupported,
              flag +
                  ": tensor parallelism over several GPUs is not available yet; the CUDA backend runs one GPU "
                  "(--tensor-parallel-size 1; --device cpu splits the model over CPU ranks)");
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
  if (reason.empty()) {
    check_cuda_tensor_parallel_size(options);
    return create_cuda_backend(std::move(model), options);
  }
  if (options.device == "cuda") throw Error(ErrorKind::kUnavailable, "--device cuda: " + reason);
  spdlog::warn("no usable GPU ({}); running on the CPU backend", reason);
#else
  if (options.device == "cuda")
    throw Error(ErrorKind::kUnavailable, "--device cuda: this qinfer was built without the CUDA backend");
#endif
  return create_cpu_backend(std::move(model), options);
}

}  // namespace qinfer
