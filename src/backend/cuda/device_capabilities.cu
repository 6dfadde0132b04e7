#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_capabilities.h"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

// Compiled like every kernel of the build, so its attributes say which image the driver loaded for the device.
__global__ void probe_kernel() {}

}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, probe_kernel);
}

DeviceCapabilities query_device_capabilities() {
  DeviceCapabilities caps;
  CUDA_CHECK(cudaGetDevice(&caps.device));
  cudaDeviceProp props{};
  CUDA_CHECK(cudaGetDeviceProperties(&props, caps.device));
  caps.name = props.name;
  caps.compute_major = props.major;
  caps.compute_minor = props.minor;
  caps.num_sms = props.multiProcessorCount;
  caps.shared_per_block_optin = props.sharedMemPerBlockOptin;
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, probe_kernel);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorKind::kUnavailable,
                std::string("this qinfer build has no kernels for ") + props.name + ": " + cudaGetErrorString(status));
  }
  caps.kernel_ptx_arch = attributes.ptxVersion;
  caps.kernel_binary_arch = attributes.binaryVersion;
  // Machine code built for the device reports the PTX version it was generated from; a JIT-compiled image reports
  // the device's architecture as its binary version and the older virtual one as its PTX version.
  caps.kernel_image_from_ptx = attributes.ptxVersion < attributes.binaryVersion;
  const int device_arch = props.major * 10 + props.minor;
  caps.programmatic_launch = props.major >= 9 && caps.kernel_ptx_arch >= 90;
#if defined(QINFER_HAVE_SM90A)
  caps.hopper_kernels = device_arch == 90 && caps.kernel_ptx_arch == 90;
#else
  (void)device_arch;
#endif
  caps.fp8_conversions = caps.kernel_ptx_arch >= 89;
  return caps;
}

std::string DeviceCapabilities::summary() const {
  return name + ", compute " + std::to_string(compute_major) + "." + std::to_string(compute_minor) + ", " +
         std::to_string(num_sms) + " SMs; kernels: " + (kernel_image_from_ptx ? "PTX compute_" : "sm_") +
         std::to_string(kernel_ptx_arch) + (kernel_image_from_ptx ? " compiled at load" : "") +
         "; programmatic launch " + (programmatic_launch ? "on" : "off") + ", Hopper kernels " +
         (hopper_kernels ? "on" : "off") + ", fp8 conversions " + (fp8_conversions ? "hardware" : "software");
}

}  // namespace qinfer::cuda
