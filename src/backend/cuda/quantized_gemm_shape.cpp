// The quantized GEMM's launch shapes (kernels/quantized_gemm.h), decided on the host without a GPU.
#include <algorithm>

#include "backend/cuda/kernels/quantized_gemm.h"

namespace qinfer::cuda {

QuantizedGemmShape quantized_gemm_default_shape() {
  // Measured on the 4B's linears at 17, 32 and 64 rows (docs/CUDA_DESIGN.md, "Quantized linears"): eight warps with
  // four tiles each are within 10 % of the best shape everywhere; four warps lose up to 40 % on gate_up.
  return {8, 4};
}

int quantized_gemm_splits(const QuantizedGemmShape& shape, int k) {
  const int tiles = (k + kQuantizedTileK - 1) / kQuantizedTileK;
  return (tiles + std::max(1, shape.tiles_per_block) - 1) / std::max(1, shape.tiles_per_block);
}

bool quantized_gemm_supports(const QuantizedGemmShape& shape) {
  return (shape.warps == 4 || shape.warps == 8) &&
         (shape.tiles_per_block == 2 || shape.tiles_per_block == 4 || shape.tiles_per_block == 8);
}

size_t quantized_gemm_workspace_floats(const QuantizedGemmShape& shape, int n, int k, int rows) {
  const int splits = quantized_gemm_splits(shape, k);
  return splits > 1 ? static_cast<size_t>(splits) * rows * n : 0;
}

}  // namespace qinfer::cuda
