// Turns the records of one load level into its LevelResult (throughputs, latency distributions, errors).
#pragma once

#include <cstddef>
#include <vector>

#include "loadgen/bench_report.h"
#include "loadgen/stream_client.h"
#include "loadgen/workload.h"

namespace qinfer::loadgen {

// prompts[i] is what records[i] sent (for prompt token counts when the server sent no usage). Throughputs and
// latencies count completed requests only; failed ones are counted under `errors`. Records from num_short on are the
// long requests of a mixed workload: the level then also has a ClassResult for each class (num_short equal to the
// number of records: no long requests, no classes).
// With questions_per_document > 1 the long requests come in runs of that many asks of one document: the first ask of
// each is the long class, the others kLongRepeatClass.
LevelResult level_result(const LoadRun& run, const std::vector<PromptSpec>& prompts, size_t num_short,
                         int questions_per_document = 1);

}  // namespace qinfer::loadgen
