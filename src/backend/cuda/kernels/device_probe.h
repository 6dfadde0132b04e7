// Whether this build carries machine code (or PTX) the current GPU can run.
#pragma once

#include <cuda_runtime.h>

namespace qinfer::cuda {

// cudaSuccess when the kernels of this build can run on the current device.
cudaError_t probe_kernel_image();

}  // namespace qinfer::cuda
