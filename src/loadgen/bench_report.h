// The results of `qinfer bench serve`: one BenchReport per run (a label), one LevelResult per load level of the sweep.
// Its JSON form is documented in docs/BENCH_SERVE.md; report_json.h reads and writes it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/gpu_sampler.h"
#include "loadgen/percentiles.h"

namespace qinfer::loadgen {

// One class of requests in a mixed workload (short chats beside long prompts): the numbers that show whether the
// long prompts stall the short requests' streams.
struct ClassResult {
  int num_requests = 0;
  int completed = 0;
  int failed = 0;
  double output_throughput = 0;  // this class's output tokens of completed requests per second of the level
  long total_input_tokens = 0;
  long total_output_tokens = 0;
  std::optional<Distribution> ttft_ms;
  std::optional<Distribution> tpot_ms;
  std::optional<Distribution> itl_ms;
  std::optional<Distribution> e2e_ms;
};

inline constexpr const char* kShortClass = "short";
inline constexpr const char* kLongClass = "long";
inline constexpr const char* kLongRepeatClass = "long_repeat";  // a document's second and later questions

// Speculative decoding during one level: the server's counters at its end minus those at its start.
struct SpeculationSummary {
  int64_t num_drafts = 0;  // sequence steps that verified proposals
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double acceptance_rate() const { return draft_tokens > 0 ? static_cast<double>(accepted_tokens) / draft_tokens : 0; }
  // Tokens a verifying step produced on average: accepted proposals plus the sampled token (vLLM's definition).
  double mean_accepted_length() const {
    return num_drafts > 0 ? 1.0 + static_cast<double>(accepted_tokens) / num_drafts : 0;
  }
};

struct LevelResult {
  std::optional<int> concurrency;      // requests in flight at most (null: no cap, with a request rate)
  std::optional<double> request_rate;  // Poisson arrivals per second (null: all at once, capped by concurrency)
  int num_requests = 0;
  int completed = 0;
  int failed = 0;
  double duration_s = 0;
  double request_throughput = 0;      // completed requests per second
  double output_throughput = 0;       // output tokens of completed requests per second
  double total_token_throughput = 0;  // (input + output) tokens of completed requests per second
  long total_input_tokens = 0;
  long total_output_tokens = 0;
  std::optional<Distribution> ttft_ms;  // time to first token
  std::optional<Distribution> tpot_ms;  // time per output token after the first: (e2e - ttft) / (output tokens - 1)
  std::optional<Distribution> itl_ms;   // gaps between consecutive stream events that carried text
  std::optional<Distribution> e2e_ms;   // end-to-end latency
  std::map<std::string, int> errors;    // kind → count
  std::map<std::string, std::string> error_samples;  // kind → the first message seen
  GpuSummary gpu;
  std::optional<SpeculationSummary> speculation;  // null: the server did not speculate (exports no counters)
  int peak_in_flight = 0;
  double client_cpu_seconds = 0;               // CPU time of the load generator's event-loop thread
  std::map<std::string, ClassResult> classes;  // kShortClass and kLongClass with long requests; else empty
};

struct BenchReport {
  std::string label;
  std::string url;
  std::string endpoint;  // /v1/completions or /v1/chat/completions
  std::string model;
  std::string dataset;  // "random" or the JSONL path
  int input_len = 0;
  int output_len = 0;
  int num_prompts = 0;
  uint64_t seed = 0;
  // Mixed workload: long requests per level beside the num_prompts short ones (0: none), their prompt and output
  // lengths and how many of them are in flight at most.
  int long_requests = 0;
  int long_input_len = 0;
  int long_output_len = 0;
  int long_concurrency = 0;
  std::string started_at;  // UTC, ISO 8601
  std::vector<LevelResult> levels;
};

// The largest concurrency level that finished without errors; nullopt if none did (or no level has a concurrency).
std::optional<int> max_concurrency_without_errors(const BenchReport& report);

// "c=8", "rate=4/s", "rate=4/s c<=16": how a level is named in tables and progress lines.
std::string level_name(const LevelResult& level);

}  // namespace qinfer::loadgen
