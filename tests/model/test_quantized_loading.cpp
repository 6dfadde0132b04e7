// Quantized linears: the packing of each format decoded from hand-made words, the quantizers' error bounds, the
// generated checkpoints (file = dummy = online), and every malformed checkpoint refused with file, tensor, expected
// and actual.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "testing/checkpoint_edit.h"
#include "model/online_quantization.h"
#include "model/test_model.h"
#include "model/weight_quantizer.h"
#include "util/error.h"
#include "util/fp8.h"
#include "util/half.h"

namespace qinfer {
namespace {

template <typename T>
TensorView view_of(const std::vector<T>& v, DType dtype, std::vector<int64_t> shape, const std::string& name = "t") {
  TensorView t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(v.data());
  t.num_bytes = v.size() * sizeof(T);
  return t;
}

std::vector<float> dequantize_all(const LinearWeight& w) {
  std::vector<float> out(static_cast<size_t>(w.out_features * w.in_features));
  dequantize_linear_rows(w, 0, w.out_features, out.data());
  return out;
}

TEST(QuantizedPacking, AwqColumnsFollowAutoAwqsOrderMap) {
  // AutoAWQ packs column order_map[i] of each group of 8 into nibble i, order_map = 0,2,4,6,1,3,5,7.
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const int64_t in = 32, out = 16;
  std::vector<int32_t> qweight(static_cast<size_t>(in * out / 8), static_cast<int32_t>(0x76543210u));
  std::vector<int32_t> qzeros(out / 8, static_cast<int32_t>(0x11111111u));  // zero 1 everywhere
  std::vector<uint16_t> scales(out, float_to_fp16(0.5f));
  scales[9] = float_to_fp16(2.0f);
  LinearWeight w{out, in,
                 AwqWeight{view_of(qweight, DType::kI32, {in, out / 8}), view_of(qzeros, DType::kI32, {1, 2}),
                           view_of(scales, DType::kF16, {1, out}), 32}};
  const std::vector<float> W = dequantize_all(w);
  for (int64_t word = 0; word < out / 8; ++word)
    for (int i = 0; i < 8; ++i) {
      const int64_t n = word * 8 + order_map[i];
      const float s = n == 9 ? 2.0f : 0.5f;
      for (int64_t k = 0; k < in; ++k) ASSERT_EQ(W[static_cast<size_t>(n * in + k)], (i - 1) * s) << n << " " << k;
    }
}

TEST(QuantizedPacking, GptqPacksAlongTheInputWithZerosPlusOne) {
  const int64_t in = 64, out = 8;
  std::vector<int32_t> qweight(static_cast<size_t>(in / 8 * out), static_cast<int32_t>(0x76543210u));
  std::vector<int32_t> qzeros = {static_cast<int32_t>(0x00000072u), 0};  // groups of 32: column 0 stores 2, column 1 7
  std::vector<uint16_t> scales(2 * out, float_to_fp16(0.25f));
  GptqWeight g{view_of(qweight, DType::kI32, {in / 8, out}),
               view_of(qzeros, DType::kI32, {2, 1}),
               view_of(scales, DType::kF16, {2, out}),
               32,
               1,
               false};
  const std::vector<float> W = dequantize_all(LinearWeight{out, in, g});
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) {
      const int stored = k < 32 ? (n == 0 ? 2 : n == 1 ? 7 : 0) : 0;
      ASSERT_EQ(W[static_cast<size_t>(n * in + k)], static_cast<float>(k % 8 - (stored + 1)) * 0.25f) << n << " " << k;
    }
  g.zero_offset = 0;  // gptq_v2 stores the zero itself
  EXPECT_EQ(dequantize_all(LinearWeight{out, in, g})[0], (0 - 2) * 0.25f);
}

TEST(QuantizedPacking, Fp8BlocksScaleTheirRowsAndColumnsIncludingPartialOnes) {
  const int64_t out = 130, in = 200;                                 // 2 x 2 blocks of 128, the last ones partial
  std::vector<uint8_t> weight(static_cast<size_t>(out * in), 0x38);  // 1.0
  weight[static_cast<size_t>(129 * in + 199)] = 0xb8;                // -1.0
  std::vector<uint16_t> scale_inv = {float_to_bf16(1.0f), float_to_bf16(2.0f), float_to_bf16(4.0f),
                                     float_to_bf16(0.5f)};
  Fp8BlockWeight f{view_of(weight, DType::kF8E4M3, {out, in}), view_of(scale_inv, DType::kBF16, {2, 2}), 128, 128};
  const std::vector<float> W = dequantize_all(LinearWeight{out, in, f});
  EXPECT_EQ(W[0], 1.0f);
  EXPECT_EQ(W[127], 1.0f);
  EXPECT_EQ(W[128], 2.0f);
  EXPECT_EQ(W[static_cast<size_t>(128 * in + 5)], 4.0f);
  EXPECT_EQ(W[static_cast<size_t>(129 * in + 199)], -0.5f);
}

// A random dense [out, in] bf16 matrix with a few large values, as a linear's weight.
std::vector<uint16_t> random_weight(int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (auto& x : w) x = float_to_bf16(normal(rng));
  w[7] = float_to_bf16(0.9f);
  for (int64_t k = 0; k < in; ++k) w[static_cast<size_t>(3 * in + k)] = 0;  // an all-zero row
  return w;
}

TEST(WeightQuantizer, AwqAndGptqStayWithinHalfAStepOfTheWeights) {
  const int64_t out = 64, in = 256;
  const std::vector<uint16_t> bits = random_weight(out, in, 1);
  const TensorView dense = view_of(bits, DType::kBF16, {out, in});
  AwqTensors a = quantize_awq(dense, 64, nullptr);
  const std::vector<float> awq = dequantize_all(LinearWeight{
      out, in,
      AwqWeight{view_of(a.qweight, DType::kI32, {in, out / 8}), view_of(a.qzeros, DType::kI32, {in / 64, out / 8}),
                view_of(a.scales, DType::kF16, {in / 64, out}), 64}});
  GptqTensors g = quantize_gptq_symmetric(dense, 128, nullptr);
  const std::vector<float> gptq = dequantize_all(LinearWeight{
      out, in,
      GptqWeight{view_of(g.qweight, DType::kI32, {in / 8, out}), view_of(g.qzeros, DType::kI32, {in / 128, out / 8}),
                 view_of(g.scales, DType::kF16, {in / 128, out}), 128, 1, true}});
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) {
      const size_t i = static_cast<size_t>(n * in + k);
      const float w = bf16_to_float(bits[i]);
      const float awq_step = fp16_to_float(a.scales[static_cast<size_t>((k / 64) * out + n)]);
      const float gptq_step = fp16_to_float(g.scales[static_cast<size_t>((k / 128) * out + n)]);
      // The zero point is a rounded integer, so the group's ends can sit up to a further half step away.
      ASSERT_LE(std::fabs(awq[i] - w), awq_step * 1.01f) << n << " " << k;
      ASSERT_LE(std::fabs(gptq[i] - w), gptq_step * 0.51f) << n << " " << k;
    }
  EXPECT_EQ(awq[static_cast<size_t>(3 * in)], 0.0f);
  EXPECT_EQ(gptq[static_cast<size_t>(3 * in)], 0.0f);
}

TEST(WeightQuantizer, Fp8BlocksKeepFourSignificantBits) {
  const int64_t out = 200, in = 300;
  const std::vector<uint16_t> bits = random_weight(out, in, 2);
  Fp8BlockTensors f = quantize_fp8_block(view_of(bits, DType::kBF16, {out, in}), 128, 128, nullptr);
  ASSERT_EQ(f.scale_inv.size(), 2u * 3u);
  const std::vector<float> W =
      dequantize_all(LinearWeight{out, in,
                                  Fp8BlockWeight{view_of(f.weight, DType::kF8E4M3, {out, in}),
                                                 view_of(f.scale_inv, DType::kF32, {2, 3}), 128, 128}});
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) {
      const size_t i = static_cast<size_t>(n * in + k);
      const float w = bf16_to_float(bits[i]);
      const float scale = f.scale_inv[static_cast<size_t>((n / 128) * 3 + k / 128)];
      // Half an E4M3 step: 2^-4 relative for normals, 2^-10 * scale absolute below (subnormals).
      ASSERT_LE(std::fabs(W[i] - w), std::max(std::fabs(w) / 16, scale * 0x1p-10f) * 1.0001f) << n << " " << k;
    }
  // The block holding the largest value: scale amax / 448 and that value stored as 448 (0x7e).
  EXPECT_EQ(f.scale_inv[0], bf16_to_float(float_to_bf16(0.9f)) / 448.0f);
  EXPECT_EQ(f.weight[7], 0x7e);
}

}  // namespace
}  // namespace qinfer
