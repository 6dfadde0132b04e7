// SwiGLU of the fused gate/up projection: out = silu(gate) * up.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct SwigluParams {
  const __nv_bfloat16* gate_up = nullptr;  // [num_tokens, 2 * intermediate]: gate | up
  __nv_bfloat16* out = nullptr;            // [num_tokens, intermediate]
  int num_tokens = 0;
  int intermediate = 0;  // multiple of 8
};

void launch_swiglu(const SwigluParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
