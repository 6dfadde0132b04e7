#include "backend/cuda/kernels/device_probe.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

__global__ void probe_kernel() {}

}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, probe_kernel);
}

bool device_supports_pdl() {
  // Asked once per process: the backend drives one device.
  static const bool supported = [] {
    int device = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return supported;
}

}  // namespace qinfer::cuda
