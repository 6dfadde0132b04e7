// Whether this build carries machine code (or PTX) the current GPU can run, and which GPU it is.
#pragma once

#include <cuda_runtime.h>

namespace qinfer::cuda {

// cudaSuccess when the kernels of this build can run on the current device.
cudaError_t probe_kernel_image();

// True when the current device has compute capability 9.0 (H100/H200), the only one sm_90a code (wgmma) runs on.
bool device_is_compute_90();

}  // namespace qinfer::cuda
