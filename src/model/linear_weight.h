// The weight of one linear layer, y = x · Wᵀ with W [out_features, in_features], in the format its checkpoint stores
// it: dense (bf16/f16/f32), AutoAWQ GEMM int4, GPTQ int4, or block-scaled FP8 E4M3. Every TensorView points into the
// LoadedModel's storage (the mapped checkpoint, or buffers made at load); nothing here owns bytes. Backends switch on
// format(): the CPU reference dequantizes rows with dequantize_linear_rows, the CUDA upload repacks for its kernels.
#pragma once

#include <array>
#include <cstdint>
#include <variant>
#include <vector>

#include "model/safetensors.h"

namespace qinfer {

enum class WeightFormat { kDense, kAwq, kGptq, kFp8Block };

std::string_view weight_format_name(WeightFormat format);  // "dense", "awq", "gptq", "fp8"

// AutoAWQ GEMM ("version": "gemm"). W[n][k] = (q(k, n) - z(k / group, n)) * scales[k / group][n], where q(k, n) is
// nibble kAwqNibbleOfColumn[n % 8] of qweight[k][n / 8] and z likewise of qzeros[k / group][n / 8]. A nibble i is
// bits 4i..4i+3 of the little-endian int32 word: AutoAWQ's packing order puts columns 0,2,4,6,1,3,5,7 into nibbles
// 0..7, so column c sits in nibble kAwqNibbleOfColumn[c].
struct AwqWeight {
  TensorView qweight;  // I32 [in, out / 8]
  TensorView qzeros;   // I32 [in / group, out / 8]
  TensorView scales;   // F16 [in / group, out]
  int group_size = 0;  // 32, 64 or 128
};
inline constexpr std::array<int, 8> kAwqNibbleOfColumn = {0, 4, 1, 5, 2, 6, 3, 7};

// GPTQ (AutoGPTQ / GPTQModel, desc_act false). W[n][k] = (q(k, n) - z(k / group, n)) * scales[k / group][n], where
// q(k, n) is nibble k % 8 of qweight[k / 8][n] (packed along the input dimension, plain order) and
// z = (nibble n % 8 of qzeros[k / group][n / 8]) + zero_offset. g_idx, when the checkpoint has it, was checked to be
// k / group at load, so it carries no information and is not kept.
struct GptqWeight {
  TensorView qweight;      // I32 [in / 8, out]
  TensorView qzeros;       // I32 [in / group, out / 8]
  TensorView scales;       // F16 [in / group, out]
  int group_size = 0;      // 32, 64 or 128
  int zero_offset = 0;     // 1 for checkpoint_format "gptq" (zeros stored minus one), 0 for "gptq_v2"
  bool symmetric = false;  // sym: every zero point (after the offset) is 8, checked at load
};

// Block-scaled FP8 (Qwen / DeepSeek `quant_method: fp8`, also what --quantization fp8 makes from a dense
// checkpoint). W[n][k] = e4m3(weight[n][k]) * scale_inv[n / block_out][k / block_in]; the last block row and
// column may be partial. Activations are the backend's business (the GPU kernels quantize them per token in groups
// of block_in; the CPU reference keeps them fp32).
struct Fp8BlockWeight {
  TensorView weight;     // F8_E4M3 [out, in], "e4m3fn": bias 7, no infinities, largest 448
  TensorView scale_inv;  // F32, BF16 or F16 [ceil(out / block_out), ceil(in / block_in)], multiplied in
  int block_out = 0;     // 128
  int block_in = 0;      // 128
};

struct LinearWeight {
  int64_t out_features = 0;
  int64_t in_features = 0;
  // Alternatives in WeightFormat's order. A dense weight is BF16, F16 or F32 [out, in].
  std::variant<TensorView, AwqWeight, GptqWeight, Fp8BlockWeight> data;

  WeightFormat format() const { return static_cast<WeightFormat>(data.index()); }
  const TensorView& dense() const { return std::get<TensorView>(data); }
  const AwqWeight& awq() const { return std::get<AwqWeight>(data); }
  const GptqWeight& gptq() const { return std::get<GptqWeight>(data); }
  const Fp8BlockWeight& fp8() const { return std::get<Fp8BlockWeight>(data); }
  // Bytes the weight occupies in its format (scales and zeros included).
  size_t stored_bytes() const;
};

// Writes rows [first_row, first_row + num_rows) of W, dequantized to fp32 as the format defines it, into
// out [num_rows, in_features]. (q - z) * s is exact in fp32; e4m3 * scale_inv is one fp32 multiplication (exact for
// BF16/F16 scales, rounded once for F32 ones).
void dequantize_linear_rows(const LinearWeight& weight, int64_t first_row, int64_t num_rows, float* out);

// One output row n of an int4 weight (AWQ or GPTQ) as its integers: W[n][k] = (codes[k] - zeros[g]) * scales[g] with
// g = k / group_size. Zeros include GPTQ's zero_offset (so they lie in 0..16); scales are the checkpoint's F16 bits.
struct Int4Row {
  std::vector<uint8_t> codes;    // [in_features], 0..15
  std::vector<uint8_t> zeros;    // [in_features / group_size]
  std::vector<uint16_t> scales;  // [in_features / group_size] F16 bits
  int group_size = 0;
};
void int4_row(const LinearWeight& weight, int64_t n, Int4Row& out);

// The scale_inv of each block_in-wide block of row n of an FP8 weight, as fp32: [ceil(in_features / block_in)].
std::vector<float> fp8_row_scales(const LinearWeight& weight, int64_t n);

}  // namespace qinfer
