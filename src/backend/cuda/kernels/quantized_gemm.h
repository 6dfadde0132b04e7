// Linear layer over quantized weights for a few dozen rows of x (decode batches of 17-64 sequences, and larger ones
// in chunks of 64 rows), on tensor cores: y = x · Wᵀ with W int4 (AWQ / GPTQ) or block-scaled FP8 in the tile layout of
// quantized_weight_layout.h, as the quantized GEMV reads it. Where the GEMV's block owns 16 weight rows and splits k
// among its warps, here every warp of a block owns its own 16 weight rows over the same k, so the block stages each
// 128-k tile of x in shared memory once for all of them: x is read from L2 once per 16 x warps weight rows instead of
// once per 16. k is split across blocks (gridDim.y) so that every block requests all it reads at once; with more than
// one split the fp32 partial sums go to a workspace and a second kernel adds them in split order, so the result does
// not depend on timing.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/quantized_gemv.h"

namespace qinfer::cuda {

inline constexpr int kQuantizedGemmMaxRows = 64;  // rows of x one launch takes

// Launch shape: warps per block (each owns 16 weight rows, or 8 gate and 8 up rows with SwiGLU) and the 128-k tiles
// of k one block multiplies, all requested at once; k splits over ceil(tiles / tiles_per_block) blocks.
struct QuantizedGemmShape {
  int warps = 4;
  int tiles_per_block = 4;
};

struct QuantizedGemmParams {
  const __nv_bfloat16* x = nullptr;  // [num_rows, k]
  QuantizedWeightView weight;
  __nv_bfloat16* y = nullptr;  // [num_rows, n] (or [num_rows, n / 2] with SwiGLU)
  int num_rows = 0;            // 1..kQuantizedGemmMaxRows
  // weight = [gate; up]: y = silu(x·gateᵀ) * (x·upᵀ), rounded as HF does.
  bool swiglu = false;
  // More than one k split: [splits, num_rows, n] fp32 partial sums (quantized_gemm_workspace_floats).
  float* workspace = nullptr;
};

// The default shape (docs/CUDA_DESIGN.md, "Quantized linears", says how it was chosen), a shape's k splits, and whether
// launch_quantized_gemm has a kernel for a shape. GPU-free.
QuantizedGemmShape quantized_gemm_default_shape();
int quantized_gemm_splits(const QuantizedGemmShape& shape, int k);
bool quantized_gemm_supports(const QuantizedGemmShape& shape);
// fp32 elements of workspace the shape needs for `rows` rows of an [n, k] weight (0 without k splits).
size_t quantized_gemm_workspace_floats(const QuantizedGemmShape& shape, int n, int k, int rows);

void launch_quantized_gemm(const QuantizedGemmParams& params, const QuantizedGemmShape& shape,
                           const KernelStream& stream);

}  // namespace qinfer::cuda
