#include "backend/cuda/quantized_weight_layout.h"

#include <bit>
#include <cstring>
#include <string>

#include "util/error.h"
#include "util/fp8.h"
#include "util/half.h"

namespace qinfer::cuda {

namespace {

// The tensor that names a part in messages.
const qinfer::TensorView& main_tensor(const qinfer::LinearWeight& w) {
  switch (w.format()) {
    case qinfer::WeightFormat::kAwq:
      return w.awq().qweight;
    case qinfer::WeightFormat::kGptq:
      return w.gptq().qweight;
    case qinfer::WeightFormat::kFp8Block:
      return w.fp8().weight;
    case qinfer::WeightFormat::kDense:
      break;
  }
  return w.dense();
}

int group_size_of(const qinfer::LinearWeight& w) {
  switch (w.format()) {
    case qinfer::WeightFormat::kAwq:
      return w.awq().group_size;
    case qinfer::WeightFormat::kGptq:
      return w.gptq().group_size;
    case qinfer::WeightFormat::kFp8Block:
      return w.fp8().block_in;
    case qinfer::WeightFormat::kDense:
      break;
  }
  return 0;
}

// Where element `col` of a row sits in the packed row: the word, and the nibble (int4) or byte (fp8) in it.
struct PackedPosition {
  int word;
  int shift;  // bits
};
PackedPosition packed_position(QuantizedFormat format, int col) {
  const int tile = col / kQuantizedTileK, in_tile = col % kQuantizedTileK;
  const int group = in_tile / 32, lane = in_tile % 32 / 8, element = in_tile % 8;
  if (format == QuantizedFormat::kInt4)
    return {tile * 16 + 4 * lane + group, 4 * kInt4NibbleOfElement[static_cast<size_t>(element)]};
  const int byte = 32 * lane + 8 * group + element;
  return {tile * 32 + byte / 4, 8 * (byte % 4)};
}

void pack_int4_row(const qinfer::LinearWeight& w, int64_t source_row, qinfer::Int4Row& row, uint32_t* weight,
                   uint32_t* scales, int k) {
  int4_row(w, source_row, row);
  for (int col = 0; col < k; ++col) {
    const PackedPosition at = packed_position(QuantizedFormat::kInt4, col);
    weight[at.word] |= static_cast<uint32_t>(row.codes[static_cast<size_t>(col)]) << at.shift;
  }
  for (size_t g = 0; g < row.zeros.size(); ++g) {
    const uint32_t zero_bf16 = float_to_bf16(128.0f + static_cast<float>(row.zeros[g]));
    scales[g] = row.scales[g] | (zero_bf16 << 16);
  }
}

void pack_fp8_row(const qinfer::LinearWeight& w, int64_t source_row, uint32_t* weight, uint32_t* scales, int k) {
  const auto* codes = reinterpret_cast<const uint8_t*>(w.fp8().weight.data) + source_row * k;
  for (int col = 0; col < k; ++col) {
    const PackedPosition at = packed_position(QuantizedFormat::kFp8Block, col);
    weight[at.word] |= static_cast<uint32_t>(codes[col]) << at.shift;
  }
  const std::vector<float> row_scales = fp8_row_scales(w, source_row);
  for (size_t g = 0; g < row_scales.size(); ++g) scales[g] = std::bit_cast<uint32_t>(row_scales[g]);
}

}  // namespace

bool is_quantized(const qinfer::LinearWeight& weight) {
  return weight.format() == qinfer::WeightFormat::kAwq || weight.format() == qinfer::WeightFormat::kGptq ||
         weight.format() == qinfer::WeightFormat::kFp8Block;
}

PackedQuantizedLinear pack_quantized_linear(std::span<const qinfer::LinearWeight* const> parts, ThreadPool& pool) {
  QINFER_CHECK(!parts.empty());
  const qinfer::LinearWeight& first = *parts.front();
  PackedQuantizedLinear packed;
  packed.format =
      first.format() == qinfer::WeightFormat::kFp8Block ? QuantizedFormat::kFp8Block : QuantizedFormat::kInt4;
  packed.k = static_cast<int>(first.in_features);
  packed.group_size = group_size_of(first);
  for (const qinfer::LinearWeight* part : parts) {
    const std::string name = main_tensor(*part).name;
    if (!is_quantized(*part) ||
        (part->format() == qinfer::WeightFormat::kFp8Block) != (packed.format == QuantizedFormat::kFp8Block))
      throw Error(ErrorKind::kUnsupported, "CUDA backend: '" + name + "' is stored as " +
                                               std::string(weight_format_name(part->format())) + " beside " +
                                               std::string(weight_format_name(first.format())) +
                                               " weights it is fused with; the parts of qkv / gate_up must share "
                                               "one quantized format");
    if (group_size_of(*part) != packed.group_size || part->in_features != first.in_features)
      throw Error(ErrorKind::kUnsupported,
                  "CUDA backend: '" + name + "' has group size " + std::to_string(group_size_of(*part)) + " and " +
                      std::to_string(part->in_features) + " inputs, the layer's other parts " +
                      std::to_string(packed.group_size) + " and " + std::to_string(first.in_features));
    packed.n += static_cast<int>(part->out_features);
  }
  if (packed.k % 32 != 0 || packed.group_size % 32 != 0)
    throw Error(ErrorKind::kUnsupported, "CUDA backend: quantized '" + main_tensor(first).name +
                                             "' needs input features and group size in " + "multiples of 32, got " +
                                             std::to_string(packed.k) + " and " + std::to_string(packed.group_size));
  const size_t row_words = static_cast<size_t>(packed.row_words());
  const size_t groups = static_cast<size_t>(packed.groups_per_row());
  packed.weight.assign(static_cast<size_t>(packed.n) * row_words, 0);
  packed.scales.assign(static_cast<size_t>(packed.n) * groups, 0);
  size_t first_row = 0;
  for (const qinfer::LinearWeight* part : parts) {
    pool.parallel_for(static_cast<size_t>(part->out_features), [&](size_t begin, size_t end) {
      qinfer::Int4Row row;
      for (size_t r = begin; r < end; ++r) {
        uint32_t* weight = packed.weight.data() + (first_row + r) * row_words;
        uint32_t* scales = packed.scales.data() + (first_row + r) * groups;
        if (packed.format == QuantizedFormat::kInt4)
          pack_int4_row(*part, static_cast<int64_t>(r), row, weight, scales, packed.k);
        else
          pack_fp8_row(*part, static_cast<int64_t>(r), weight, scales, packed.k);
      }
    });
    first_row += static_cast<size_t>(part->out_features);
  }
  return packed;
}

float packed_weight_value(const PackedQuantizedLinear& packed, int row, int col) {
  const PackedPosition at = packed_position(packed.format, col);
  const uint32_t word =
      packed.weight[static_cast<size_t>(row) * static_cast<size_t>(packed.row_words()) + static_cast<size_t>(at.word)];
  const uint32_t meta = packed.scales[static_cast<size_t>(row) * static_cast<size_t>(packed.groups_per_row()) +
                                      static_cast<size_t>(col / packed.group_size)];
  if (packed.format == QuantizedFormat::kInt4) {
    const float code = static_cast<float>((word >> at.shift) & 0xfu);
    const float zero = bf16_to_float(static_cast<uint16_t>(meta >> 16)) - 128.0f;
    return (code - zero) * fp16_to_float(static_cast<uint16_t>(meta & 0xffffu));
  }
  return fp8_e4m3_to_float(static_cast<uint8_t>(word >> at.shift)) * std::bit_cast<float>(meta);
}

}  // namespace qinfer::cuda
