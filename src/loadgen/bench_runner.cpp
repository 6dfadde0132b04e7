#include "loadgen/bench_runner.h"

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "loadgen/gpu_sampler.h"
#include "loadgen/http_get.h"
#include "loadgen/level_stats.h"
#include "loadgen/request_body.h"
#include "loadgen/stream_client.h"
#include "loadgen/workload.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qinfer::loadgen {

namespace {

// Different prompts for every level: repeated prompts would be served from the prefix or response cache.
constexpr uint64_t kLevelSeedStride = 0x9E3779B97F4A7C15ull;
// And long prompts unlike the short ones of the same level.
constexpr uint64_t kLongPromptSeed = 0xD1B54A32D192ED03ull;

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The server's speculative decoding counters now; nullopt when /metrics does not answer or has none.
std::optional<SpeculationCounters> read_speculation_counters(const CurlApi& curl, const std::string& base_url,
                                                             const std::string& api_key) {
  const HttpResponse response = http_get(curl, base_url + "/metrics", api_key, 10);
  if (response.status != 200) return std::nullopt;
  return speculation_counters(parse_prometheus_text(response.body));
}

std::optional<SpeculationSummary> speculation_between(const std::optional<SpeculationCounters>& before,
                                                      const std::optional<SpeculationCounters>& after) {
  if (!after) return std::nullopt;
  const SpeculationCounters start = before.value_or(SpeculationCounters{});
  return SpeculationSummary{.num_drafts = std::llround(after->num_drafts - start.num_drafts),
                            .draft_tokens = std::llround(after->draft_tokens - start.draft_tokens),
                            .accepted_tokens = std::llround(after->accepted_tokens - start.accepted_tokens)};
}

std::string first_model_id(const CurlApi& curl, const std::string& base_url, const std::string& api_key) {
  const HttpResponse response = http_get(curl, base_url + "/v1/models", api_key, 30);
  const std::string where = "GET " + base_url + "/v1/models";
  if (!response.error.empty())
    throw Error(ErrorKind::kUnavailable, where + ": " + response.error + " (is the server running? or pass --model)");
  if (response.status != 200)
    throw Error(ErrorKind::kUnavailable,
                where + ": HTTP " + std::to_string(response.status) + ": " + response.body.substr(0, 300));
  const nlohmann::json json = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("data") || !json["data"].is_array() || json["data"].empty() ||
      !json["data"][0].contains("id") || !json["data"][0]["id"].is_string())
    throw Error(ErrorKind::kFormat, where + ": expected {\"data\": [{\"id\": ...}]}; pass --model");
  return json["data"][0]["id"].get<std::string>();
}

// The level's short prompts, then its long ones.
std::vector<PromptSpec> level_prompts(const BenchOptions& o, size_t level, const std::optional<Tokenizer>& tokenizer) {
  const Tokenizer* exact = tokenizer ? &*tokenizer : nullptr;
  const uint64_t seed = o.seed + kLevelSeedStride * level;
  std::vector<PromptSpec> prompts = o.dataset != "random" ? load_jsonl_prompts(o.dataset, o.num_prompts)
                                                          : random_prompts(o.num_prompts, o.input_len, seed, exact);
  if (o.long_requests == 0) return prompts;
  for (PromptSpec& document : random_prompts(o.long_requests, o.long_input_len, seed ^ kLongPromptSeed, exact)) {
    document.output_len = o.long_output_len > 0 ? o.long_output_len : o.output_len;
    if (o.long_questions == 1) {
      prompts.push_back(std::move(document));
      continue;
    }
    // The document, then a question that differs from the other asks (the server reports the prompt's tokens).
    for (int q = 0; q < o.long_questions; ++q) {
      PromptSpec ask = document;
      ask.text += "\n\nQuestion " + std::to_string(q + 1) + ": what does the text above say about item " +
                  std::to_string(7 * q + 3) + "?";
      ask.prompt_tokens.reset();
      prompts.push_back(std::move(ask));
    }
  }
  return prompts;
}

void validate_long_requests(const BenchOptions& o) {
  if (o.long_requests < 0) throw Error(ErrorKind::kInvalidArgument, "--long-requests must be at least 0");
  if (o.long_input_len < 0) throw Error(ErrorKind::kInvalidArgument, "--long-input-len must be at least 0");
  if (o.long_requests > 0 && o.long_input_len == 0)
    throw Error(ErrorKind::kInvalidArgument, "--long-requests " + std::to_string(o.long_requests) +
                                                 " needs --long-input-len (tokens of each long prompt)");
  if (o.long_requests == 0 && o.long_input_len > 0)
    throw Error(ErrorKind::kInvalidArgument, "--long-input-len " + std::to_string(o.long_input_len) +
                                                 " needs --long-requests (long requests per level, at least 1)");
  if (o.long_output_len < 0)
    throw Error(ErrorKind::kInvalidArgument, "--long-output-len must not be negative (0: --output-len)");
  if (o.long_concurrency < 1) throw Error(ErrorKind::kInvalidArgument, "--long-concurrency must be at least 1");
  if (o.long_questions < 1) throw Error(ErrorKind::kInvalidArgument, "--long-questions must be at least 1");
  if (o.long_questions > 1 && o.long_requests == 0)
    throw Error(ErrorKind::kInvalidArgument, "--long-questions needs --long-requests (the documents to ask about)");
}

}  // namespace

std::vector<double> poisson_arrivals(int count, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> arrivals;
  double t = 0;
  for (int i = 0; i < count; ++i) {
    const double uniform = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    t += -std::log1p(-uniform) / rate;
    arrivals.push_back(t);
  }
  return arrivals;
}

std::string server_base_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) url.resize(url.size() - 3);
  return url;
}

BenchReport run_bench(const BenchOptions& o, ProgressDisplay& progress) {
  if (o.num_prompts < 1) throw Error(ErrorKind::kInvalidArgument, "--num-prompts must be at least 1");
  if (o.output_len < 1) throw Error(ErrorKind::kInvalidArgument, "--output-len must be at least 1");
  if (o.concurrencies.empty() == o.request_rates.empty())
    throw Error(ErrorKind::kInvalidArgument, "give either --concurrency or --request-rate");
  for (int c : o.concurrencies)
    if (c < 1) throw Error(ErrorKind::kInvalidArgument, "--concurrency values must be at least 1");
  for (double r : o.request_rates)
    if (!(r > 0) || !std::isfinite(r))
      throw Error(ErrorKind::kInvalidArgument, "--request-rate values must be positive numbers");
  validate_long_requests(o);

  CurlSession curl("bench serve");
  const std::string base = server_base_url(o.url);
  BenchReport report;
  report.label = o.label;
  report.url = base;
  report.endpoint = o.chat ? "/v1/chat/completions" : "/v1/completions";
  report.model = o.model.empty() ? first_model_id(curl.api(), base, o.api_key) : o.model;
  report.dataset = o.dataset;
  report.input_len = o.input_len;
  report.output_len = o.output_len;
  report.num_prompts = o.num_prompts;
  report.seed = o.seed;
  if (o.long_requests > 0) {
    report.long_requests = o.long_requests;
    report.long_input_len = o.long_input_len;
    report.long_output_len = o.long_output_len > 0 ? o.long_output_len : o.output_len;
    report.long_concurrency = o.long_concurrency;
  }
  report.started_at = utc_now_iso8601();

  std::optional<Tokenizer> tokenizer;
  if (!o.tokenizer_dir.empty() && (o.dataset == "random" || o.long_requests > 0))
    tokenizer = Tokenizer::from_model_dir(o.tokenizer_dir);
  const RequestShape shape{
      .model = report.model, .chat = o.chat, .output_len = o.output_len, .extra_body = o.extra_body};
  StreamClient client(curl.api(), StreamTarget{.url = base + report.endpoint,
                                               .api_key = o.api_key,
                                               .request_timeout_seconds = o.request_timeout_seconds});

  const size_t num_levels = o.concurrencies.empty() ? o.request_rates.size() : o.concurrencies.size();
  for (size_t i = 0; i < num_levels; ++i) {
    const std::vector<PromptSpec> prompts = level_prompts(o, i, tokenizer);
    std::vector<std::string> bodies;
    for (const PromptSpec& prompt : prompts) bodies.push_back(request_body(shape, prompt));
    LoadSchedule schedule;
    schedule.side_requests = static_cast<size_t>(o.long_requests) * static_cast<size_t>(o.long_questions);
    schedule.side_max_in_flight = o.long_concurrency;
    LevelResult key;
    if (!o.concurrencies.empty()) {
      schedule.max_in_flight = o.concurrencies[i];
      key.concurrency = o.concurrencies[i];
    } else {
      schedule.max_in_flight = o.max_concurrency;
      schedule.arrivals_s = poisson_arrivals(o.num_prompts, o.request_rates[i], o.seed + kLevelSeedStride * i);
      key.request_rate = o.request_rates[i];
      if (o.max_concurrency > 0) key.concurrency = o.max_concurrency;
    }
    const std::string name = level_name(key);
    const std::optional<SpeculationCounters> speculation_before =
        read_speculation_counters(curl.api(), base, o.api_key);
    GpuSampler sampler(curl.api(), base + "/metrics", o.api_key, o.metrics_interval_seconds);
    const int total = static_cast<int>(bodies.size());
    const LoadRun run = client.run(bodies, schedule, [&](const LoadProgress& p) { progress.update(name, total, p); });
    LevelResult level = level_result(run, prompts, static_cast<size_t>(o.num_prompts), o.long_questions);
    level.gpu = sampler.stop();
    level.speculation = speculation_between(speculation_before, read_speculation_counters(curl.api(), base, o.api_key));
    level.concurrency = key.concurrency;
    level.request_rate = key.request_rate;
    progress.level_done(level);
    report.levels.push_back(std::move(level));
  }
  return report;
}

}  // namespace qinfer::loadgen
