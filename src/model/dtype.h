// Element types of checkpoint tensors and activations.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace qinfer {

enum class DType { kF32, kF16, kBF16 };

std::string_view dtype_name(DType dtype);  // safetensors spelling: F32, F16, BF16
// Parses the safetensors spelling; nullopt for types qinfer does not load.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace qinfer
