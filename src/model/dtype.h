// Element types of checkpoint tensors and activations.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace qinfer {

// kF32/kF16/kBF16 are the floating types the backends compute with (model dtype, dense weights, norms). kF8E4M3
// (FP8 weights) and kI32 (packed int4 words of AWQ/GPTQ, g_idx) occur only inside quantized linear weights.
enum class DType { kF32, kF16, kBF16, kF8E4M3, kI32 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // safetensors spelling: F32, F16, BF16, F8_E4M3, I32
bool dtype_is_float(DType dtype);          // F32, F16 or BF16
// Parses the safetensors spelling; nullopt for types qinfer does not load.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace qinfer
