// Decode-shaped linear layer over quantized weights for 1..16 rows of x, on tensor cores: y = x · Wᵀ with W int4
// (AWQ / GPTQ) or block-scaled FP8 in the tile layout of quantized_weight_layout.h. The packed bytes are streamed once
// with 16-byte loads, decoded in registers to exact bf16 codes (int4: code - zero; fp8: the E4M3 value), multiplied on
// mma.sync per 32-k group, and each group's fp32 sum is scaled in fp32, so the result is the dot product with the
// format's dequantized weights up to fp32 summation order. Also: the same weights dequantized to bf16 [n, k] (for
// cuBLASLt when more rows make a GEMM the faster route).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/quantized_format.h"

namespace qinfer::cuda {

inline constexpr int kQuantizedGemvMaxRows = 16;

// A quantized weight on the device, as PackedQuantizedLinear lays it out.
struct QuantizedWeightView {
  QuantizedFormat format = QuantizedFormat::kInt4;
  const uint32_t* weight = nullptr;  // [n, row_words]
  const uint32_t* scales = nullptr;  // [n, groups_per_row]
  int group_size = 0;                // k per scale
  int n = 0;
  int k = 0;  // a multiple of 32
};

struct QuantizedGemvParams {
  const __nv_bfloat16* x = nullptr;  // [num_rows, k]
  QuantizedWeightView weight;
  void* y = nullptr;  // [num_rows, n] bf16 or fp32 (y_fp32)
  bool y_fp32 = false;
  int num_rows = 0;  // 1..kQuantizedGemvMaxRows
  // weight = [gate; up] ([n/2 + n/2, k]): y = silu(x·gateᵀ) * (x·upᵀ), [num_rows, n/2] bf16, rounded as HF does.
  bool swiglu = false;
};

// Launch shape: warps per block (each block owns 16 weight rows; its warps split the 128-k tiles) and tiles a warp
// holds in registers at once. The first tiles_in_flight tiles of every warp are requested before the kernel waits for
// the producer of x, so a shape whose warps x tiles_in_flight covers k streams the whole weight while its predecessor
// still runs.
struct QuantizedGemvShape {
  int warps = 4;
  int tiles_in_flight = 5;
};
// The shapes launch_quantized_gemv has kernels for: 4, 8 or 16 warps x 2 or 5 tiles in flight.
const std::vector<QuantizedGemvShape>& quantized_gemv_shapes();
// The default for a weight (docs/CUDA_DESIGN.md, "Quantized linears", says how it was chosen).
QuantizedGemvShape quantized_gemv_default_shape(const QuantizedWeightView& weight);

void launch_quantized_gemv(const QuantizedGemvParams& params, QuantizedGemvShape shape, const KernelStream& stream);
inline void launch_quantized_gemv(const QuantizedGemvParams& params, const KernelStream& stream) {
  launch_quantized_gemv(params, quantized_gemv_default_shape(params.weight), stream);
}

// out [n, k] bf16 = the weight dequantized, each element rounded once to bf16.
void launch_dequantize_weight(const QuantizedWeightView& weight, __nv_bfloat16* out, const KernelStream& stream);

}  // namespace qinfer::cuda
