#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "backend/factory.h"
#include "cli/bench_throughput.h"
#include "cli/draft_model.h"
#include "cli/engine_flags.h"
#include "cli/model_loading.h"
#include "cli/speculative_config.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::cli {
namespace {

using BenchClock = std::chrono::steady_clock;

EngineFlags offline_engine_flags() {
  EngineFlags flags;
  flags.target_itl_ms = 0;  // offline work has no inter-token latency to keep
  return flags;
}

struct ThroughputFlags {
  ModelFlags model;
  BackendOptions backend;
  int num_prompts = 256;
  int input_len = 1024;
  int output_len = 128;
  int shared_prefix_len = 0;
  std::string dataset;
  uint64_t seed = 0;
  EngineFlags engine = offline_engine_flags();
  bool json = false;
};

double seconds_between(BenchClock::time_point from, BenchClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

[[noreturn]] void bad_line(const std::filesystem::path& path, size_t line, const std::string& what) {
  throw Error(ErrorKind::kFormat, path.string() + ":" + std::to_string(line) + ": " + what);
}

void run_bench_throughput(const ThroughputFlags& f) {
  if (f.dataset.empty() && (f.num_prompts < 1 || f.input_len < 1 || f.output_len < 1 || f.shared_prefix_len < 0 ||
                            f.shared_prefix_len > f.input_len))
    throw Error(ErrorKind::kInvalidArgument,
                "--num-prompts, --input-len and --output-len must be at least 1, --shared-prefix-len in [0, "
                "--input-len]");
  auto model = load_model_from_flags(f.model);
  BackendOptions backend_options = f.backend;
  EngineOptions options = engine_options_from_flags(backend_options, f.engine);
  SpeculativeBackends backends = create_backends(model, f.model, backend_options, options.speculation);
  Backend* backend = backends.target.get();
  const int vocab = model->config.vocab_size;
  ThroughputWorkload workload =
      f.dataset.empty() ? random_workload(f.num_prompts, f.input_len, f.output_len, f.shared_prefix_len, vocab, f.seed)
                        : read_dataset(f.dataset, vocab, f.output_len);
  ThroughputReport report = run_throughput(*backend, options, workload, backends.draft.get());
  nlohmann::json out = report.to_json();
  out["backend"] = backend->name();
  out["kv_cache_blocks"] = backend->kv_cache().num_blocks;
  out["kv_cache_dtype"] = kv_cache_dtype_name(backend->kv_cache().dtype);
  if (f.json) {
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("bench throughput on %s (KV cache %s): %lld requests, %lld input + %lld output tokens in %.2f s\n",
              backend->name().c_str(), kv_cache_dtype_name(backend->kv_cache().dtype),
              static_cast<long long>(report.requests), static_cast<long long>(report.input_tokens),
              static_cast<long long>(report.output_tokens), report.elapsed_s);
  std::printf("  %.2f requests/s, %.1f output tok/s, %.1f total tok/s\n", out["requests_per_s"].get<double>(),
              out["output_tokens_per_s"].get<double>(), out["total_tokens_per_s"].get<double>());
  std::printf(
      "  mean batch size %.1f, prefix-cache hit rate %.1f %%, %llu preemptions, TTFT mean %.3f s median %.3f s\n",
      report.mean_batch_size, 100 * report.prefix_cache_hit_rate, static_cast<unsigned long long>(report.preemptions),
      report.mean_ttft_s, report.median_ttft_s);
  std::printf("  engine host overhead %.0f us per step; %.1f %% of the time inside the backend\n",
              report.host_overhead_per_step_s * 1e6, 100 * report.backend_fraction);
  if (out.contains("speculative")) {
    const nlohmann::json& spec = out["speculative"];
    std::printf("  speculative: %llu tokens proposed, %llu accepted (%.1f %%), mean accepted length %.2f\n",
                spec["draft_tokens"].get<unsigned long long>(), spec["accepted_tokens"].get<unsigned long long>(),
                100 * spec["acceptance_rate"].get<double>(), spec["mean_accepted_length"].get<double>());
  }
}

}  // namespace

ThroughputWorkload random_workload(int num_prompts, int input_len, int output_len, int shared_prefix_len,
                                   int vocab_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, vocab_size - 1);
  std::vector<int32_t> shared(static_cast<size_t>(shared_prefix_len));
  for (int32_t& id : shared) id = token(rng);
  ThroughputWorkload workload;
  workload.ignore_eos = true;
  for (int i = 0; i < num_prompts; ++i) {
    std::vector<int32_t> prompt = shared;
    while (static_cast<int>(prompt.size()) < input_len) prompt.push_back(token(rng));
    workload.prompts.push_back(std::move(prompt));
    workload.max_tokens.push_back(output_len);
  }
  return workload;
}

ThroughputWorkload read_dataset(const std::filesystem::path& path, int vocab_size, int default_output_len) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kNotFound, "--dataset: cannot open " + path.string());
  ThroughputWorkload workload;
  std::string text;
  for (size_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json entry = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!entry.is_object()) bad_line(path, line, "not a JSON object");
    if (entry.contains("prompt") && !entry.contains("prompt_ids"))
      bad_line(path, line, "text \"prompt\" needs the tokenizer; give \"prompt_ids\" (a list of token ids)");
    const auto ids = entry.find("prompt_ids");
    if (ids == entry.end() || !ids->is_array() || ids->empty())
      bad_line(path, line, "\"prompt_ids\" must be a non-empty list of token ids");
    std::vector<int32_t> prompt;
    for (const auto& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
        bad_line(path, line,
                 "\"prompt_ids\" holds " + id.dump() + ", expected an id in [0, " + std::to_string(vocab_size) + ")");
      prompt.push_back(id.get<int32_t>());
    }
    int32_t output_len = default_output_len;
    if (const auto n = entry.find("output_len"); n != entry.end()) {
      if (!n->is_number_integer() || n->get<int64_t>() < 1 || n->get<int64_t>() > (1 << 30))
        bad_line(path, line, "\"output_len\" must be a positive integer, got " + n->dump());
      output_len = n->get<int32_t>();
    }
    workload.prompts.push_back(std::move(prompt));
    workload.max_tokens.push_back(output_len);
  }
  if (workload.prompts.empty()) throw Error(ErrorKind::kFormat, path.string() + ": no requests");
  return workload;
}

nlohmann::json ThroughputReport::to_json() const {
  double seconds = std::max(elapsed_s, 1e-9);
  nlohmann::json json = {{"requests", requests},
                         {"input_tokens", input_tokens},
                         {"output_tokens", output_tokens},
                         {"elapsed_s", elapsed_s},
                         {"requests_per_s", static_cast<double>(requests) / seconds},
                         {"output_tokens_per_s", static_cast<double>(output_tokens) / seconds},
                         {"total_tokens_per_s", static_cast<double>(input_tokens + output_tokens) / seconds},
                         {"mean_batch_size", mean_batch_size},
                         {"host_overhead_per_step_s", host_overhead_per_step_s},
                         {"backend_fraction", backend_fraction},
                         {"prefix_cache_hit_rate", prefix_cache_hit_rate},
                         {"preemptions", preemptions},
                         {"mean_ttft_s", mean_ttft_s},
                         {"median_ttft_s", median_ttft_s}};
  if (speculation.verifications > 0) json["speculative"] = speculation_stats_json(speculation);
  return json;
}

ThroughputReport run_throughput(Backend& backend, const EngineOptions& options, const ThroughputWorkload& workload,
                                Backend* draft) {
  Engine engine(backend, options, draft);
  {  // Warm-up (first-call allocations, graph capture) outside the timed region.
    GenerationRequest warmup;
    warmup.prompt.assign(workload.prompts[0].begin(),
                         workload.prompts[0].begin() + std::min<size_t>(workload.prompts[0].size(), 8));
    warmup.max_tokens = 2;
    engine.submit(warmup);
    while (engine.step() || engine.has_work()) {
    }
  }
  const EngineStats before = engine.stats();
  const size_t n = workload.prompts.size();
  std::vector<BenchClock::time_point> first_output(n);
  std::vector<RequestHandle> handles;
  const BenchClock::time_point start = BenchClock::now();
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest request;
    request.prompt = workload.prompts[i];
    request.sampling.temperature = 0.0f;
    request.max_tokens = workload.max_tokens[i];
    request.ignore_eos = workload.ignore_eos;
    BenchClock::time_point* first = &first_output[i];
    request.on_output = [first] {
      if (first->time_since_epoch().count() == 0) *first = BenchClock::now();
    };
    handles.push_back(engine.submit(std::move(request)));
  }
  BenchClock::time_point last_progress = start;
  while (engine.step() || engine.has_work()) {
    if (seconds_between(last_progress, BenchClock::now()) > 5.0) {
      last_progress = BenchClock::now();
      EngineStats now = engine.stats();
      spdlog::info("bench throughput: {} of {} requests done, {} running, {} waiting",
                   now.finished_requests - before.finished_requests, n, now.num_running, now.num_waiting);
    }
  }
  ThroughputReport report;
  report.elapsed_s = seconds_between(start, BenchClock::now());
  std::vector<double> ttft;
  for (size_t i = 0; i < n; ++i) {
    Usage usage = handles[i].stream->usage();
    if (workload.ignore_eos && usage.completion_tokens != workload.max_tokens[i])
      throw Error(ErrorKind::kInternal, "request " + std::to_string(i) + " produced " +
                                            std::to_string(usage.completion_tokens) + " tokens, expected " +
                                            std::to_string(workload.max_tokens[i]));
    report.input_tokens += usage.prompt_tokens;
    report.output_tokens += usage.completion_tokens;
    ttft.push_back(seconds_between(start, first_output[i]));
  }
  report.requests = static_cast<int64_t>(n);
  const EngineStats after = engine.stats();
  uint64_t steps = after.scheduler.steps - before.scheduler.steps;
  uint64_t scheduled = after.scheduler.scheduled_sequences - before.scheduler.scheduled_sequences;
  report.mean_batch_size = steps ? static_cast<double>(scheduled) / static_cast<double>(steps) : 0.0;
  const double backend_seconds = after.backend_seconds - before.backend_seconds;
  const double host_seconds = after.step_seconds - before.step_seconds - backend_seconds;
  report.host_overhead_per_step_s = steps ? host_seconds / static_cast<double>(steps) : 0.0;
  report.backend_fraction = report.elapsed_s > 0 ? backend_seconds / report.elapsed_s : 0.0;
  int64_t queried = after.blocks.prefix_query_tokens - before.blocks.prefix_query_tokens;
  int64_t hits = after.blocks.prefix_hit_tokens - before.blocks.prefix_hit_tokens;
  report.prefix_cache_hit_rate = queried ? static_cast<double>(hits) / static_cast<double>(queried) : 0.0;
  report.preemptions = after.scheduler.preemptions - before.scheduler.preemptions;
  report.speculation = after.scheduler.speculation.since(before.scheduler.speculation);
  std::sort(ttft.begin(), ttft.end());
  for (double t : ttft) report.mean_ttft_s += t / static_cast<double>(n);
  report.median_ttft_s = ttft[n / 2];
  return report;
}

void register_bench_throughput(CLI::App& bench) {
  auto f = std::make_shared<ThroughputFlags>();
  CLI::App* cmd = bench.add_subcommand("throughput", "Offline throughput of the engine over many requests");
  add_model_flags(*cmd, f->model);
  add_backend_flags(*cmd, f->backend);
  cmd->add_option("--num-prompts", f->num_prompts, "Random prompts to run")->capture_default_str();
  cmd->add_option("--input-len", f->input_len, "Tokens per random prompt")->capture_default_str();
  cmd->add_option("--output-len", f->output_len, "Tokens to generate per request (EOS ignored for random prompts)")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-len", f->shared_prefix_len, "Leading tokens shared by every random prompt")
      ->capture_default_str();
  cmd->add_option("--dataset", f->dataset, "JSONL of {\"prompt_ids\": [...], \"output_len\": N} instead of random");
  cmd->add_option("--seed", f->seed, "Seed of the random prompts")->capture_default_str();
  add_engine_flags(*cmd, f->backend, f->engine);
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->callback([f] { run_bench_throughput(*f); });
}

}  // namespace qinfer::cli
