// bf16 / fp16 <-> fp32 conversions on the host, bit-exact and independent of the CPU's float environment.
#pragma once

#include <bit>
#include <cstdint>

namespace qinfer {

inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Round to nearest even, NaN kept quiet.
inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: normalise the mantissa.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    uint32_t bits = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    return std::bit_cast<float>(bits);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// Round to nearest even; overflow gives infinity, NaN stays a quiet NaN.
inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= 16) return sign | 0x7c00u;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // value = significand * 2^(exponent - 23)
  if (exponent >= -14) {
    uint32_t half = (static_cast<uint32_t>(exponent + 15) << 10) | ((magnitude & 0x7fffffu) >> 13);
    const uint32_t remainder = magnitude & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;  // a carry may reach infinity
    return static_cast<uint16_t>(sign | half);
  }
  if (exponent < -25) return sign;
  // Subnormal: a count of 2^-24 units, significand * 2^(exponent + 1), rounded to nearest even.
  const int shift = -(exponent + 1);
  const uint32_t quotient = significand >> shift, remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t count = quotient + ((remainder > halfway || (remainder == halfway && (quotient & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | count);
}

}  // namespace qinfer
