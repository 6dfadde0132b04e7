#include "loadgen/level_stats.h"

#include <algorithm>

#include "util/error.h"

namespace qinfer::loadgen {

namespace {

// The records of a run at `indices` as one class.
ClassResult class_result(const LoadRun& run, const std::vector<PromptSpec>& prompts,
                         const std::vector<size_t>& indices) {
  ClassResult result;
  result.num_requests = static_cast<int>(indices.size());
  std::vector<double> ttft, tpot, itl, e2e;
  for (size_t i : indices) {
    const RequestRecord& r = run.records[i];
    if (!r.ok()) {
      ++result.failed;
      continue;
    }
    ++result.completed;
    const long output_tokens = r.output_tokens();
    result.total_output_tokens += output_tokens;
    result.total_input_tokens += r.usage_prompt_tokens.value_or(prompts[i].prompt_tokens.value_or(0));
    e2e.push_back(r.latency_s * 1e3);
    if (r.text_arrivals_s.empty()) continue;
    const double first = r.text_arrivals_s.front();
    ttft.push_back(first * 1e3);
    for (size_t k = 1; k < r.text_arrivals_s.size(); ++k)
      itl.push_back((r.text_arrivals_s[k] - r.text_arrivals_s[k - 1]) * 1e3);
    if (output_tokens > 1) tpot.push_back((r.latency_s - first) * 1e3 / static_cast<double>(output_tokens - 1));
  }
  if (run.duration_s > 0) result.output_throughput = static_cast<double>(result.total_output_tokens) / run.duration_s;
  result.ttft_ms = summarize(std::move(ttft));
  result.tpot_ms = summarize(std::move(tpot));
  result.itl_ms = summarize(std::move(itl));
  result.e2e_ms = summarize(std::move(e2e));
  return result;
}

std::vector<size_t> index_range(size_t begin, size_t end) {
  std::vector<size_t> indices;
  for (size_t i = begin; i < end; ++i) indices.push_back(i);
  return indices;
}

}  // namespace

LevelResult level_result(const LoadRun& run, const std::vector<PromptSpec>& prompts, size_t num_short,
                         int questions_per_document) {
  QINFER_CHECK(run.records.size() == prompts.size(), "one prompt per record");
  QINFER_CHECK(num_short <= run.records.size(), "short requests come first");
  const ClassResult all = class_result(run, prompts, index_range(0, run.records.size()));
  LevelResult level;
  level.num_requests = all.num_requests;
  level.completed = all.completed;
  level.failed = all.failed;
  level.total_input_tokens = all.total_input_tokens;
  level.total_output_tokens = all.total_output_tokens;
  level.output_throughput = all.output_throughput;
  level.ttft_ms = all.ttft_ms;
  level.tpot_ms = all.tpot_ms;
  level.itl_ms = all.itl_ms;
  level.e2e_ms = all.e2e_ms;
  level.duration_s = run.duration_s;
  level.peak_in_flight = run.peak_in_flight;
  level.client_cpu_seconds = run.client_cpu_seconds;
  for (const RequestRecord& r : run.records)
    if (!r.ok() && level.errors[r.error_kind]++ == 0) level.error_samples[r.error_kind] = r.error_message;
  if (run.duration_s > 0) {
    level.request_throughput = level.completed / run.duration_s;
    level.total_token_throughput =
        static_cast<double>(level.total_input_tokens + level.total_output_tokens) / run.duration_s;
  }
  if (num_short < run.records.size()) {
    level.classes[kShortClass] = class_result(run, prompts, index_range(0, num_short));
    std::vector<size_t> first_asks, repeats;
    for (size_t i = num_short; i < run.records.size(); ++i)
      ((i - num_short) % static_cast<size_t>(std::max(1, questions_per_document)) == 0 ? first_asks : repeats)
          .push_back(i);
    level.classes[kLongClass] = class_result(run, prompts, first_asks);
    if (!repeats.empty()) level.classes[kLongRepeatClass] = class_result(run, prompts, repeats);
  }
  return level;
}

}  // namespace qinfer::loadgen
