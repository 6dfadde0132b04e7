// Decode-shaped linear layer on tensor cores for 1..16 rows of x: the GEMV's weight stream (16-byte streaming loads
// straight to registers, many blocks, no shared-memory staging) with mma.sync doing the multiply-adds, so that the
// work per weight byte stays flat as rows are added (the CUDA-core GEMV converts and multiplies every weight once per
// row and is issue-bound from 2 rows on).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/gemv.h"

namespace qinfer::cuda {

// Launch shape: warps per block (each block owns 16 weight rows; its warps split k) and 32-k groups a warp keeps in
// flight (two 16-byte loads per lane per group).
struct GemvMmaShape {
  int warps = 8;
  int groups_in_flight = 2;
};

// The launch shapes launch_gemv_mma has kernels for: 4, 8 or 16 warps x 2 or 4 groups in flight.
const std::vector<GemvMmaShape>& gemv_mma_shapes();

// True when launch_gemv_mma takes these parameters: k a multiple of 32 (whole 32-k groups), 1..16 rows.
bool gemv_mma_supports(const GemvParams& params);

// The default shape for a linear of n outputs (docs/CUDA_DESIGN.md, "Tensor-core GEMV", says how it was chosen).
GemvMmaShape gemv_mma_default_shape(int n);

// y = x·weightᵀ (or the SwiGLU of gate/up, as launch_gemv) for 1..16 rows; fp32 accumulation in fixed order.
void launch_gemv_mma(const GemvParams& params, GemvMmaShape shape, const KernelStream& stream);

}  // namespace qinfer::cuda
