// What the GPU and the kernel image loaded for it support, decided once when the backend starts. Every capability
// decision (programmatic launch, the Hopper kernels, kernel choices) reads this struct, never the device's compute
// capability alone: a build whose CUDA code is PTX for an older virtual architecture (e.g. `89-virtual`, compiled by
// the driver for an H200 at load) has the Hopper-only instructions compiled out even on a Hopper device.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace qinfer::cuda {

struct DeviceCapabilities {
  int device = 0;
  std::string name;       // "NVIDIA H200"
  int compute_major = 0;  // the device's compute capability
  int compute_minor = 0;
  int num_sms = 0;
  int kernel_ptx_arch = 0;     // virtual architecture the loaded kernels were compiled from: __CUDA_ARCH__ / 10
  int kernel_binary_arch = 0;  // architecture of the machine code that runs (after the driver's JIT for PTX images)
  bool kernel_image_from_ptx = false;  // the driver compiled the kernels from PTX at load
  size_t shared_per_block_optin = 0;   // bytes of dynamic shared memory one block may opt in to
  // Programmatic dependent launch: the device supports it (9.0+) and the loaded kernels were compiled with
  // griddepcontrol (PTX 9.0+); otherwise kernels must launch in plain stream order.
  bool programmatic_launch = false;
  // The sm_90a kernels (wgmma, bulk tensor copies): this build has them and the device runs its sm_90a image.
  bool hopper_kernels = false;
  // Hardware E4M3 <-> f16 conversions in the loaded image (PTX 8.9+); older images convert in software.
  bool fp8_conversions = false;

  // One line for the start-up log.
  std::string summary() const;
};

// Queries the current device and the kernel image loaded for it. Throws Error(kUnavailable) with the driver's reason
// when the build has no kernel for this device.
DeviceCapabilities query_device_capabilities();

// cudaSuccess when the kernels of this build can run on the current device.
cudaError_t probe_kernel_image();

class GraphNodeRoles;

// Where kernels are enqueued: a stream, the capabilities of the device it runs on (which decide launch features), and
// while a decode graph is captured the record of which captured kernels play a role in its edge policy.
struct KernelStream {
  cudaStream_t stream = nullptr;
  const DeviceCapabilities& device;
  GraphNodeRoles* roles = nullptr;
};

}  // namespace qinfer::cuda
