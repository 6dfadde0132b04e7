// Markdown tables of a run for people: one row per load level; with a second run (--compare), a before/after table
// with one row per level and label and a summary per label (max concurrency without errors, peak memory, util).
#pragma once

#include <string>

#include "loadgen/bench_report.h"

namespace qinfer::loadgen {

// `baseline`, when given, is listed first in the comparison (the "before").
std::string markdown_report(const BenchReport& report, const BenchReport* baseline);

}  // namespace qinfer::loadgen
