#include "loadgen/bench_report.h"

#include <algorithm>
#include <cstdio>

namespace qinfer::loadgen {

std::optional<int> max_concurrency_without_errors(const BenchReport& report) {
  std::optional<int> best;
  for (const LevelResult& level : report.levels)
    if (level.concurrency && level.failed == 0 && level.completed > 0)
      best = std::max(best.value_or(*level.concurrency), *level.concurrency);
  return best;
}

std::string level_name(const LevelResult& level) {
  char rate[64] = "";
  if (level.request_rate) std::snprintf(rate, sizeof rate, "rate=%g/s", *level.request_rate);
  if (!level.concurrency) return rate;
  if (!level.request_rate) return "c=" + std::to_string(*level.concurrency);
  return std::string(rate) + " c<=" + std::to_string(*level.concurrency);
}

}  // namespace qinfer::loadgen
