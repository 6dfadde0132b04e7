// Whether this build carries machine code (or PTX) the current GPU can run, and what the device supports.
#pragma once

#include <cuda_runtime.h>

namespace qinfer::cuda {

// cudaSuccess when the kernels of this build can run on the current device.
cudaError_t probe_kernel_image();

// True when the current device supports programmatic dependent launch (compute capability 9.0 or newer).
bool device_supports_pdl();

}  // namespace qinfer::cuda
