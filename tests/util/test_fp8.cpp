// util/fp8.h: the E4M3 codec against a brute-force nearest-value search, and the KV cache's vector quantisation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "util/fp8.h"

namespace qinfer {
namespace {

// The finite non-negative E4M3 values in increasing order with their bytes, decoded independently of the codec:
// subnormals m * 2^-9, normals (8 + m) * 2^(e - 10), 0x7f excluded (NaN).
std::vector<std::pair<double, uint8_t>> finite_positive_values() {
  std::vector<std::pair<double, uint8_t>> values;
  for (int bits = 0; bits < 0x7f; ++bits) {
    const int e = bits >> 3, m = bits & 7;
    values.emplace_back(e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10),
                        static_cast<uint8_t>(bits));
  }
  return values;
}

// Nearest value, ties to the even byte (even mantissa), beyond 448 saturated.
uint8_t nearest_by_search(float x, const std::vector<std::pair<double, uint8_t>>& values) {
  const double a = std::fabs(static_cast<double>(x));
  uint8_t best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& [value, bits] : values) {
    const double distance = std::fabs(value - a);
    if (distance < best_distance || (distance == best_distance && (bits & 1) == 0)) {
      best = bits;
      best_distance = distance;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(Fp8E4m3, DecodesEveryByte) {
  const auto values = finite_positive_values();
  for (const auto& [value, bits] : values) {
    EXPECT_EQ(fp8_e4m3_to_float(bits), static_cast<float>(value)) << int{bits};
    EXPECT_EQ(fp8_e4m3_to_float(static_cast<uint8_t>(bits | 0x80)), -static_cast<float>(value)) << int{bits};
  }
  EXPECT_EQ(fp8_e4m3_to_float(kFp8E4m3MaxBits), kFp8E4m3Max);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
}

TEST(Fp8E4m3, EncodeOfDecodeIsIdentity) {
  for (int bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) == 0x7f) continue;
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<uint8_t>(bits))), bits) << bits;
  }
}

TEST(Fp8E4m3, EncodesToTheNearestValueWithTiesToEven) {
  const auto values = finite_positive_values();
  std::vector<float> samples;
  // Every midpoint between neighbours, and just either side of it: the rounding boundaries.
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float mid = static_cast<float>((values[i].first + values[i + 1].first) / 2);
    samples.insert(samples.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log2_magnitude(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) samples.push_back(std::exp2(log2_magnitude(rng)));
  samples.insert(samples.end(), {0.0f, 0x1p-10f, 0x1p-11f, 0x1.8p-10f, 448.0f, 464.0f, 479.9f, 480.0f, 1e6f, 1e-30f});
  for (float x : samples) {
    EXPECT_EQ(float_to_fp8_e4m3(x), nearest_by_search(x, values)) << x;
    EXPECT_EQ(float_to_fp8_e4m3(-x), nearest_by_search(-x, values)) << -x;
  }
  EXPECT_EQ(float_to_fp8_e4m3(INFINITY), kFp8E4m3MaxBits);
  EXPECT_EQ(float_to_fp8_e4m3(-INFINITY), 0x80 | kFp8E4m3MaxBits);
  EXPECT_EQ(float_to_fp8_e4m3(NAN), kFp8E4m3NanBits);
}

TEST(Fp8E4m3, VectorQuantisationMapsTheLargestMagnitudeTo448) {
  const std::vector<float> x = {0.5f, -2.0f, 0.001f, 1.25f};
  uint8_t bytes[4];
  const float scale = quantize_fp8_e4m3_vector(x, bytes);
  EXPECT_EQ(scale, 2.0f / 448.0f);
  EXPECT_EQ(bytes[1], 0x80 | kFp8E4m3MaxBits);
  for (size_t i = 0; i < x.size(); ++i) {
    const float restored = fp8_e4m3_to_float(bytes[i]) * scale;
    EXPECT_NEAR(restored, x[i], std::fabs(x[i]) / 16 + 2.0f / 448.0f * 0x1p-9f) << i;  // half an ulp of 3 bits
  }
  const std::vector<float> zeros(8, 0.0f);
  uint8_t zero_bytes[8];
  EXPECT_EQ(quantize_fp8_e4m3_vector(zeros, zero_bytes), 0.0f);
  for (uint8_t b : zero_bytes) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace qinfer
