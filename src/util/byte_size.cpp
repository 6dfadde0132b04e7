#include "util/byte_size.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace qinfer {

std::optional<int64_t> parse_byte_size(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !std::isfinite(value) || value < 0) return std::nullopt;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  constexpr double kKi = 1024.0, kMi = kKi * kKi, kGi = kMi * kKi, kTi = kGi * kKi;
  static constexpr std::array<std::pair<std::string_view, double>, 18> kUnits = {{
      {"", 1.0},
      {"B", 1.0},
      {"k", 1e3},
      {"m", 1e6},
      {"g", 1e9},
      {"t", 1e12},
      {"kB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"K", kKi},
      {"M", kMi},
      {"G", kGi},
      {"T", kTi},
      {"KiB", kKi},
      {"MiB", kMi},
      {"GiB", kGi},
      {"TiB", kTi},
  }};
  double scale = 0;
  for (const auto& [name, factor] : kUnits)
    if (unit == name) scale = factor;
  if (scale == 0) return std::nullopt;
  const double bytes = std::round(value * scale);
  if (bytes >= 0x1p63) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(int64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (std::abs(value) >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0)
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buffer, sizeof buffer,
                  std::abs(value) < 10    ? "%.2f %s"
                  : std::abs(value) < 100 ? "%.1f %s"
                                          : "%.0f %s",
                  value, kUnits[unit]);
  return buffer;
}

}  // namespace qinfer
