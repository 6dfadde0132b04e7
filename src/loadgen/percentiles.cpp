#include "loadgen/percentiles.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace qinfer::loadgen {

double percentile_linear(std::span<const double> sorted, double q) {
  QINFER_CHECK(!sorted.empty(), "percentile of no values");
  QINFER_CHECK(q >= 0 && q <= 100, "percentile outside [0, 100]");
  const double position = static_cast<double>(sorted.size() - 1) * q / 100.0;
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

std::optional<Distribution> summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  Distribution d;
  d.count = values.size();
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  d.p50 = percentile_linear(values, 50);
  d.p90 = percentile_linear(values, 90);
  d.p99 = percentile_linear(values, 99);
  return d;
}

}  // namespace qinfer::loadgen
