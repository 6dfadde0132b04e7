#include "model/linear_weight.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "util/error.h"
#include "util/fp8.h"
#include "util/half.h"

namespace qinfer {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kAwq:
      return "awq";
    case WeightFormat::kGptq:
      return "gptq";
    case WeightFormat::kFp8Block:
      return "fp8";
  }
  return "?";
}

size_t LinearWeight::stored_bytes() const {
  switch (format()) {
    case WeightFormat::kDense:
      return dense().num_bytes;
    case WeightFormat::kAwq:
      return awq().qweight.num_bytes + awq().qzeros.num_bytes + awq().scales.num_bytes;
    case WeightFormat::kGptq:
      return gptq().qweight.num_bytes + gptq().qzeros.num_bytes + gptq().scales.num_bytes;
    case WeightFormat::kFp8Block:
      return fp8().weight.num_bytes + fp8().scale_inv.num_bytes;
  }
  return 0;
}

namespace {

float float_at(const TensorView& t, size_t index) {
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, t.data + index * 4, 4);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, t.data + index * 2, 2);
      return t.dtype == DType::kF16 ? fp16_to_float(bits) : bf16_to_float(bits);
    }
    case DType::kF8E4M3:
      return fp8_e4m3_to_float(static_cast<uint8_t>(t.data[index]));
    case DType::kI32:
      break;
  }
  QINFER_CHECK(false, "not a floating tensor");
  return 0;
}

uint32_t word_at(const TensorView& t, size_t index) {
  uint32_t w;
  std::memcpy(&w, t.data + index * 4, 4);
  return w;
}

int nibble(uint32_t word, int i) { return static_cast<int>((word >> (4 * i)) & 0xfu); }

void dense_row(const TensorView& t, int64_t row, int64_t cols, float* out) {
  const size_t base = static_cast<size_t>(row * cols);
  if (t.dtype == DType::kF32) {
    std::memcpy(out, t.data + base * 4, static_cast<size_t>(cols) * 4);
    return;
  }
  for (int64_t k = 0; k < cols; ++k) out[k] = float_at(t, base + static_cast<size_t>(k));
}

// AWQ and GPTQ scales are F16 (checked when binding).
uint16_t half_bits_at(const TensorView& t, size_t index) {
  uint16_t bits;
  std::memcpy(&bits, t.data + index * 2, 2);
  return bits;
}

void awq_codes(const AwqWeight& w, int64_t n, int64_t out_features, int64_t in_features, Int4Row& out) {
  const int64_t words = out_features / 8;
  const int shift_nibble = kAwqNibbleOfColumn[static_cast<size_t>(n % 8)];
  for (int64_t g = 0; g < in_features / w.group_size; ++g) {
    out.zeros[static_cast<size_t>(g)] =
        static_cast<uint8_t>(nibble(word_at(w.qzeros, static_cast<size_t>(g * words + n / 8)), shift_nibble));
    out.scales[static_cast<size_t>(g)] = half_bits_at(w.scales, static_cast<size_t>(g * out_features + n));
  }
  for (int64_t k = 0; k < in_features; ++k)
    out.codes[static_cast<size_t>(k)] =
        static_cast<uint8_t>(nibble(word_at(w.qweight, static_cast<size_t>(k * words + n / 8)), shift_nibble));
}

void gptq_codes(const GptqWeight& w, int64_t n, int64_t out_features, int64_t in_features, Int4Row& out) {
  const int64_t zero_words = out_features / 8;
  for (int64_t g = 0; g < in_features / w.group_size; ++g) {
    out.zeros[static_cast<size_t>(g)] = static_cast<uint8_t>(
        nibble(word_at(w.qzeros, static_cast<size_t>(g * zero_words + n / 8)), static_cast<int>(n % 8)) +
        w.zero_offset);
    out.scales[static_cast<size_t>(g)] = half_bits_at(w.scales, static_cast<size_t>(g * out_features + n));
  }
  for (int64_t k = 0; k < in_features; k += 8) {
    const uint32_t word = word_at(w.qweight, static_cast<size_t>((k / 8) * out_features + n));
    for (int j = 0; j < 8; ++j) out.codes[static_cast<size_t>(k + j)] = static_cast<uint8_t>(nibble(word, j));
  }
}

void int4_dequantized_row(const LinearWeight& w, int64_t n, float* out) {
  Int4Row row;
  int4_row(w, n, row);
  for (int64_t k = 0; k < w.in_features; ++k) {
    const size_t g = static_cast<size_t>(k / row.group_size);
    out[k] = static_cast<float>(row.codes[static_cast<size_t>(k)] - row.zeros[g]) * fp16_to_float(row.scales[g]);
  }
}

// Every E4M3 code's value, computed once (immutable after initialisation).
const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int code = 0; code < 256; ++code) t[static_cast<size_t>(code)] = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    return t;
  }();
  return table;
}

void fp8_row(const Fp8BlockWeight& w, int64_t n, int64_t in_features, float* out) {
  const int64_t scale_cols = (in_features + w.block_in - 1) / w.block_in;
  const size_t scale_row = static_cast<size_t>((n / w.block_out) * scale_cols);
  const auto* bytes = reinterpret_cast<const uint8_t*>(w.weight.data) + n * in_features;
  const std::array<float, 256>& values = e4m3_values();
  for (int64_t b = 0; b < scale_cols; ++b) {
    const float scale = float_at(w.scale_inv, scale_row + static_cast<size_t>(b));
    for (int64_t k = b * w.block_in; k < std::min<int64_t>((b + 1) * w.block_in, in_features); ++k)
      out[k] = values[bytes[k]] * scale;
  }
}

}  // namespace

void dequantize_linear_rows(const LinearWeight& w, int64_t first_row, int64_t num_rows, float* out) {
  QINFER_CHECK(first_row >= 0 && first_row + num_rows <= w.out_features);
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t n = first_row + r;
    float* row = out + r * w.in_features;
    switch (w.format()) {
      case WeightFormat::kDense:
        dense_row(w.dense(), n, w.in_features, row);
        break;
      case WeightFormat::kAwq:
      case WeightFormat::kGptq:
        int4_dequantized_row(w, n, row);
        break;
      case WeightFormat::kFp8Block:
        fp8_row(w.fp8(), n, w.in_features, row);
        break;
    }
  }
}

void int4_row(const LinearWeight& w, int64_t n, Int4Row& out) {
  QINFER_CHECK(n >= 0 && n < w.out_features);
  QINFER_CHECK(w.format() == WeightFormat::kAwq || w.format() == WeightFormat::kGptq, "not an int4 weight");
  const int group_size = w.format() == WeightFormat::kAwq ? w.awq().group_size : w.gptq().group_size;
  const size_t groups = static_cast<size_t>(w.in_features / group_size);
  out.group_size = group_size;
  out.codes.resize(static_cast<size_t>(w.in_features));
  out.zeros.resize(groups);
  out.scales.resize(groups);
  if (w.format() == WeightFormat::kAwq)
    awq_codes(w.awq(), n, w.out_features, w.in_features, out);
  else
    gptq_codes(w.gptq(), n, w.out_features, w.in_features, out);
}

std::vector<float> fp8_row_scales(const LinearWeight& weight, int64_t n) {
  const Fp8BlockWeight& w = weight.fp8();
  QINFER_CHECK(n >= 0 && n < weight.out_features);
  const int64_t scale_cols = (weight.in_features + w.block_in - 1) / w.block_in;
  const size_t scale_row = static_cast<size_t>((n / w.block_out) * scale_cols);
  std::vector<float> scales(static_cast<size_t>(scale_cols));
  for (int64_t b = 0; b < scale_cols; ++b)
    scales[static_cast<size_t>(b)] = float_at(w.scale_inv, scale_row + static_cast<size_t>(b));
  return scales;
}

}  // namespace qinfer
