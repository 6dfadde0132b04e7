// Turns the records of one load level into its LevelResult (throughputs, latency distributions, errors).
#pragma once

#include <vector>

#include "loadgen/bench_report.h"
#include "loadgen/stream_client.h"
#include "loadgen/workload.h"

namespace qinfer::loadgen {

// prompts[i] is what records[i] sent (for prompt token counts when the server sent no usage). Throughputs and
// latencies count completed requests only; failed ones are counted under `errors`.
LevelResult level_result(const LoadRun& run, const std::vector<PromptSpec>& prompts);

}  // namespace qinfer::loadgen
