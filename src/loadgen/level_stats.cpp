#include "loadgen/level_stats.h"

#include "util/error.h"

namespace qinfer::loadgen {

LevelResult level_result(const LoadRun& run, const std::vector<PromptSpec>& prompts) {
  QINFER_CHECK(run.records.size() == prompts.size(), "one prompt per record");
  LevelResult level;
  level.num_requests = static_cast<int>(run.records.size());
  level.duration_s = run.duration_s;
  level.peak_in_flight = run.peak_in_flight;
  level.client_cpu_seconds = run.client_cpu_seconds;
  std::vector<double> ttft, tpot, itl, e2e;
  for (size_t i = 0; i < run.records.size(); ++i) {
    const RequestRecord& r = run.records[i];
    if (!r.ok()) {
      ++level.failed;
      if (level.errors[r.error_kind]++ == 0) level.error_samples[r.error_kind] = r.error_message;
      continue;
    }
    ++level.completed;
    const long output_tokens = r.output_tokens();
    level.total_output_tokens += output_tokens;
    level.total_input_tokens += r.usage_prompt_tokens.value_or(prompts[i].prompt_tokens.value_or(0));
    e2e.push_back(r.latency_s * 1e3);
    if (r.text_arrivals_s.empty()) continue;
    const double first = r.text_arrivals_s.front();
    ttft.push_back(first * 1e3);
    for (size_t k = 1; k < r.text_arrivals_s.size(); ++k)
      itl.push_back((r.text_arrivals_s[k] - r.text_arrivals_s[k - 1]) * 1e3);
    if (output_tokens > 1) tpot.push_back((r.latency_s - first) * 1e3 / static_cast<double>(output_tokens - 1));
  }
  if (run.duration_s > 0) {
    level.request_throughput = level.completed / run.duration_s;
    level.output_throughput = static_cast<double>(level.total_output_tokens) / run.duration_s;
    level.total_token_throughput =
        static_cast<double>(level.total_input_tokens + level.total_output_tokens) / run.duration_s;
  }
  level.ttft_ms = summarize(std::move(ttft));
  level.tpot_ms = summarize(std::move(tpot));
  level.itl_ms = summarize(std::move(itl));
  level.e2e_ms = summarize(std::move(e2e));
  return level;
}

}  // namespace qinfer::loadgen
