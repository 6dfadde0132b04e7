// Quantized linear weights in the layout the CUDA kernels read, made on the host at upload (GPU-free, unit-tested).
//
// Both formats keep W [n, k] row by row, each row cut into 128-k tiles whose bytes are ordered for the tensor-core
// GEMV (kernels/quantized_gemv.cu): lane t (0..3) of a quad reads the elements 32i + 8t + j of a tile (i = 0..3 the
// tile's 32-k groups, j = 0..7) as one contiguous run, so that one 16-byte load per row and tile (int4) or two (fp8)
// feed the four groups' mma.sync fragments without shuffles. k is padded to whole tiles with zero codes.
//  - kInt4 (AutoAWQ and GPTQ): 16 uint32 words per tile; word 4t + i holds elements 32i + 8t + j, element j in nibble
//    kInt4NibbleOfElement[j], so that one mask of a word (and of its shifts by 4, 8, 12) yields the bf16 pairs
//    (j, j + 1). Per row and group of group_size k: a uint32 whose low half is the f16 scale and whose high half is
//    the bf16 value 128 + zero (the kernels subtract it from 128 + code, which is exact in bf16).
//  - kFp8Block: 32 words (128 E4M3 bytes) per tile; byte 32t + 8i + j holds element 32i + 8t + j. Per row and group of
//    group_size (= the checkpoint's block_in, 128) k: the fp32 scale_inv of the row's block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/quantized_format.h"
#include "model/linear_weight.h"
#include "util/thread_pool.h"

namespace qinfer::cuda {

struct PackedQuantizedLinear {
  QuantizedFormat format = QuantizedFormat::kInt4;
  int n = 0;                     // output features
  int k = 0;                     // input features, a multiple of 32
  int group_size = 0;            // k per scale: 32, 64 or 128
  std::vector<uint32_t> weight;  // [n, row_words()]
  std::vector<uint32_t> scales;  // [n, groups_per_row()]: int4 {f16 scale | bf16(128 + zero) << 16}, fp8 fp32 bits

  int tiles_per_row() const { return (k + kQuantizedTileK - 1) / kQuantizedTileK; }
  int row_words() const { return tiles_per_row() * (format == QuantizedFormat::kInt4 ? 16 : 32); }
  int groups_per_row() const { return (k + group_size - 1) / group_size; }
};

// Whether `weight` is stored in a format the CUDA kernels run (AWQ, GPTQ, FP8 block).
bool is_quantized(const qinfer::LinearWeight& weight);

// Repacks `parts`, stacked along the output dimension (q, k, v or gate, up), into one weight of the kernels' layout.
// Throws Error(kUnsupported) naming the tensor when the parts mix formats or group sizes, when k is not a multiple of
// 32, or when an FP8 part's block_in is not a multiple of 32. Rows are packed in parallel on `pool`.
PackedQuantizedLinear pack_quantized_linear(std::span<const qinfer::LinearWeight* const> parts, ThreadPool& pool);

// Element (row, col) of the packed weight, dequantized as the kernels do (for tests): (code - zero) * scale for int4,
// e4m3 * scale_inv for fp8, in fp32.
float packed_weight_value(const PackedQuantizedLinear& packed, int row, int col);

}  // namespace qinfer::cuda
