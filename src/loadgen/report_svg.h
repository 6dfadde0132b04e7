// An SVG chart of latency against throughput, one line per run (label): left panel P50 TTFT, right panel P50 TPOT,
// both against output tokens/s, one point per load level. Plain SVG text with axes, ticks and a legend.
#pragma once

#include <string>
#include <vector>

#include "loadgen/bench_report.h"

namespace qinfer::loadgen {

std::string svg_chart(const std::vector<const BenchReport*>& runs);

// Axis ticks: 0 and multiples of a 1/2/5 × 10^k step up to at least `max` (about five ticks).
std::vector<double> axis_ticks(double max);

}  // namespace qinfer::loadgen
