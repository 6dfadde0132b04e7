// BenchReport ⇄ JSON (schema "qinfer.bench_serve.v1", documented in docs/BENCH_SERVE.md). Missing measurements are
// null, never 0, so a reader can tell "not measured" from "zero".
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loadgen/bench_report.h"

namespace qinfer::loadgen {

inline constexpr const char* kBenchServeSchema = "qinfer.bench_serve.v1";

nlohmann::json report_to_json(const BenchReport& report);

// Reads a report written by report_to_json (for --compare). Throws Error(kFormat) naming the file and field.
BenchReport report_from_json(const nlohmann::json& json, const std::filesystem::path& file);

}  // namespace qinfer::loadgen
