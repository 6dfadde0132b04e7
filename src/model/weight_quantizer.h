// Quantizes a dense linear weight W [out, in] into the tensors of a checkpoint format, deterministically (the same
// bytes on every machine): round-to-nearest from each group's range, as AutoAWQ / GPTQ do before any calibration,
// and FP8 scales from each block's amax. Used by make-test-model, dummy weights and --quantization fp8 (online FP8).
#pragma once

#include <cstdint>
#include <vector>

#include "model/safetensors.h"

namespace qinfer {

class ThreadPool;

// AutoAWQ GEMM, zero point: per (group of `group_size` input rows, output column) scale = max(max - min, 1e-5) / 15
// rounded to fp16, zero = clamp(round(-min / scale), 0, 15), q = clamp(round(w / scale) + zero, 0, 15), rounding
// half to even; packed as linear_weight.h's AwqWeight describes.
struct AwqTensors {
  std::vector<int32_t> qweight;  // [in, out / 8]
  std::vector<int32_t> qzeros;   // [in / group, out / 8]
  std::vector<uint16_t> scales;  // fp16 [in / group, out]
};
AwqTensors quantize_awq(const TensorView& dense, int group_size, ThreadPool* pool);

// GPTQ, symmetric, checkpoint_format "gptq" (zeros stored minus one): scale = 2 * amax / 15 rounded to fp16 (1 for
// an all-zero group), zero 8, q = clamp(round(w / scale) + 8, 0, 15); g_idx[k] = k / group.
struct GptqTensors {
  std::vector<int32_t> qweight;  // [in / 8, out]
  std::vector<int32_t> qzeros;   // [in / group, out / 8], every nibble 7
  std::vector<uint16_t> scales;  // fp16 [in / group, out]
  std::vector<int32_t> g_idx;    // [in]
};
GptqTensors quantize_gptq_symmetric(const TensorView& dense, int group_size, ThreadPool* pool);

// Block-scaled FP8: per block of block_out x block_in (edge blocks partial) q = e4m3_rne_satfinite(w * (448 / amax)),
// scale_inv = amax / 448 (0 and q = 0 for an all-zero block): the two fp32 operations of util/fp8.h's KV-cache
// quantizer.
struct Fp8BlockTensors {
  std::vector<uint8_t> weight;   // E4M3 [out, in]
  std::vector<float> scale_inv;  // [ceil(out / block_out), ceil(in / block_in)]
};
Fp8BlockTensors quantize_fp8_block(const TensorView& dense, int block_out, int block_in, ThreadPool* pool);

}  // namespace qinfer
