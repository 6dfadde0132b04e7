// fp8 E4M3 ("e4m3fn": bias 7, no infinities, 0x7f / 0xff are NaN, largest finite 448) <-> fp32 on the host, bit-exact
// and independent of the CPU's float environment, plus the per-vector quantisation of the fp8 KV cache. The CUDA
// kernels produce the same bytes: `__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)` rounds to nearest even and
// saturates finite values the same way.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

namespace qinfer {

constexpr float kFp8E4m3Max = 448.0f;
constexpr uint8_t kFp8E4m3MaxBits = 0x7e;  // 448 = 1.75 * 2^8
constexpr uint8_t kFp8E4m3NanBits = 0x7f;

inline float fp8_e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-9
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);      // 1.m * 2^(e-7)
}

// Round to nearest even; finite values beyond the range saturate to +-448 (as __NV_SATFINITE); NaN gives 0x7f.
inline uint8_t float_to_fp8_e4m3(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return kFp8E4m3NanBits;
  if (magnitude >= 0x7f800000u) return sign | kFp8E4m3MaxBits;  // infinity saturates
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -10) return sign;                                   // below half the smallest subnormal (2^-9): zero
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // value = significand * 2^(exponent - 23)
  const auto round_shift = [](uint32_t v, int shift) {               // v / 2^shift, ties to even
    const uint32_t quotient = v >> shift, remainder = v & ((1u << shift) - 1), half = 1u << (shift - 1);
    return quotient + ((remainder > half || (remainder == half && (quotient & 1u))) ? 1u : 0u);
  };
  if (exponent < -6) {  // subnormal target: a count of 2^-9 units; 8 units is the smallest normal, 0x08, as encoded
    return sign | static_cast<uint8_t>(round_shift(significand, 14 - exponent));
  }
  uint32_t four_bits = round_shift(significand, 20);  // 1.mmm as 8..16
  int field = exponent + 7;
  if (four_bits == 16) {
    four_bits = 8;
    ++field;
  }
  if (field > 15 || (field == 15 && (four_bits & 7u) == 7u)) return sign | kFp8E4m3MaxBits;
  return sign | static_cast<uint8_t>((field << 3) | (four_bits & 7u));
}

// One (token, KV head) vector of the fp8 KV cache: out[i] = e4m3(x[i] * (448 / amax)), returns the scale amax / 448 by
// which the stored values are multiplied when read (0 for an all-zero vector, whose bytes are then 0). GPU kernels
// compute the same two fp32 operations in the same order, so both produce identical bytes and scales.
inline float quantize_fp8_e4m3_vector(std::span<const float> x, uint8_t* out) {
  float amax = 0;
  for (float v : x) amax = std::fmax(amax, std::fabs(v));
  const float inverse = amax > 0 ? kFp8E4m3Max / amax : 0.0f;
  for (size_t i = 0; i < x.size(); ++i) out[i] = float_to_fp8_e4m3(x[i] * inverse);
  return amax / kFp8E4m3Max;
}

}  // namespace qinfer
