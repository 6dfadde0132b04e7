#include "backend/cuda/kernels/device_probe.h"

namespace qinfer::cuda {

namespace {

__global__ void probe_kernel() {}

}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, probe_kernel);
}

}  // namespace qinfer::cuda
