// Summary statistics of latency samples: mean and the percentiles every serving benchmark reports.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace qinfer::loadgen {

struct Distribution {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// The q-th percentile (0 <= q <= 100) of ascending `sorted` values by linear interpolation between closest ranks —
// numpy.percentile's default ("linear", method 7 of Hyndman & Fan): position (n - 1) * q / 100, interpolated between
// the two neighbouring order statistics. `sorted` must not be empty.
double percentile_linear(std::span<const double> sorted, double q);

// Mean, P50, P90 and P99 of the values (any order); std::nullopt for no values, so reports show null, not zeros.
std::optional<Distribution> summarize(std::vector<double> values);

}  // namespace qinfer::loadgen
