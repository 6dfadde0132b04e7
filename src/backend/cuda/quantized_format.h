// The quantized weight formats the CUDA kernels run and the constants of their tile layout (quantized_weight_layout.h
// describes it; this header is what kernels include, free of the model's host types).
#pragma once

namespace qinfer::cuda {

enum class QuantizedFormat { kInt4, kFp8Block };

inline constexpr int kQuantizedTileK = 128;  // k per tile of a packed row
// The nibble of a packed int4 word that holds element j (0..7) of a lane's eight: pairs (j, j + 1) sit in nibbles
// (i, i + 4), so that masking a word and its shifts by 4, 8 and 12 with 0x000f000f yields them as 16-bit halves.
inline constexpr int kInt4NibbleOfElement[8] = {0, 4, 1, 5, 2, 6, 3, 7};

}  // namespace qinfer::cuda
