// qinfer bench: `bench` is a parent command. `latency` (here) runs fixed-shape batches through the backend (prefill,
// then decode, greedy unless sampling flags are given) and reports speed against the measured H200 copy bandwidth;
// `throughput` (cmd_bench_throughput.cpp) runs requests through the engine; `serve` (cmd_bench_serve.cpp) loads a
// running server over HTTP. Further subcommands register on the `bench` sub-app in register_bench().
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "backend/backend.h"
#include "backend/factory.h"
#include "cli/bench_throughput.h"
#include "cli/commands.h"
#include "cli/draft_model.h"
#include "cli/engine_flags.h"
#include "cli/model_loading.h"
#include "cli/sampling_flags.h"
#include "cli/speculative_config.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/logging.h"

#ifdef QINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/tensor_parallel_cuda_backend.h"
#endif

namespace qinfer::cli {

namespace {

constexpr double kCopyBandwidthBytesPerSecond = 4.27e12;  // measured device copy on the H200 (GUIDE §5)

struct LatencyFlags {
  ModelFlags model;
  BackendOptions backend;
  int batch = 1;
  int input_len = 512;
  int output_len = 128;
  SamplingFlags sampling;
  bool json = false;
  int prompt_period = 0;  // > 0: each prompt repeats its first prompt_period tokens
  std::string speculative_config;
  bool fixed_speculative_tokens = false;  // k stays num_speculative_tokens: the cost curve whatever is accepted
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Prompt ids spread over the vocabulary, different per sequence; with a period, the first `period` of them repeated.
std::vector<int32_t> bench_prompt(int length, int sequence, int vocab, int period) {
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int i = 0; i < length; ++i) {
    const int64_t at = period > 0 ? i % period : i;
    ids[static_cast<size_t>(i)] =
        static_cast<int32_t>((at * 7919 + static_cast<int64_t>(sequence) * 104729 + 13) % vocab);
  }
  return ids;
}

struct LatencyRun {
  double prefill_seconds = 0;
  double ttft_seconds = 0;
  std::vector<double> decode_step_seconds;
  int64_t decode_tokens = 0;     // tokens the decode steps produced, over all sequences
  SpeculationStats speculation;  // with --speculative-config
  // Draft model, over the decode steps after the first: the draft's steps and time, and the target's time in Backend
  // calls over all decode steps (the verify steps' cost). The first decode step's proposals include the draft's
  // catch-up on the whole prompt, a prefill, which draft_first_step holds apart.
  DraftStats draft;
  DraftStats draft_first_step;
  double decode_backend_seconds = 0;
};

// With --speculative-config: the same sequences through the engine, which proposes and verifies tokens. Prefill is
// every step until each sequence has its first token; each later step is a decode step, producing one or more tokens
// per sequence.
LatencyRun run_through_engine(Backend& backend, Backend* draft, const LatencyFlags& f, const SamplingParams& sampling,
                              int input_len, int output_len) {
  EngineOptions options = engine_options_from_flags(f.backend, EngineFlags{});
  options.speculation = parse_speculative_config(f.speculative_config);
  options.speculation.adaptive = !f.fixed_speculative_tokens;
  options.max_model_len = f.input_len + f.output_len;  // what the bench needs, not the model's whole context
  Engine engine(backend, options, draft);              // its own block manager: no prefix cached by an earlier run
  std::vector<RequestHandle> handles;
  for (int s = 0; s < f.batch; ++s) {
    GenerationRequest request;
    request.prompt = bench_prompt(input_len, s, backend.config().vocab_size, f.prompt_period);
    request.sampling = sampling;
    request.seed = sampling.seed + static_cast<uint64_t>(s);
    request.max_tokens = output_len;
    request.ignore_eos = true;
    handles.push_back(engine.submit(request));
  }
  LatencyRun result;
  std::vector<bool> started(handles.size(), false);
  size_t num_started = 0;
  const auto start = Clock::now();
  std::vector<StreamDelta> deltas;
  EngineStats decode_start;  // the counters when every sequence had its first token
  DraftStats draft_after_first_step;
  for (;;) {
    const auto step_start = Clock::now();
    if (!engine.step() && !engine.has_work()) break;
    const double step_seconds = seconds_since(step_start);
    const bool decoding = num_started == handles.size();
    for (size_t s = 0; s < handles.size(); ++s) {
      deltas.clear();
      handles[s].stream->wait_drain(deltas, std::chrono::milliseconds(0));
      for (const StreamDelta& delta : deltas) {
        if (!delta.error.empty()) throw Error(ErrorKind::kInternal, "bench latency: " + delta.error);
        if (decoding) result.decode_tokens += static_cast<int64_t>(delta.token_ids.size());
        if (!started[s] && !delta.token_ids.empty()) {
          started[s] = true;
          ++num_started;
          if (s == 0) result.ttft_seconds = seconds_since(start);
        }
      }
    }
    if (decoding) {
      result.decode_step_seconds.push_back(step_seconds);
      if (result.decode_step_seconds.size() == 1) draft_after_first_step = engine.stats().draft;
    } else if (num_started == handles.size()) {
      result.prefill_seconds = seconds_since(start);
      decode_start = engine.stats();
    }
  }
  const EngineStats end = engine.stats();
  result.speculation = end.scheduler.speculation;
  if (result.decode_step_seconds.empty()) draft_after_first_step = end.draft;
  result.draft = end.draft.since(draft_after_first_step);
  result.draft_first_step = draft_after_first_step.since(decode_start.draft);
  result.decode_backend_seconds = end.backend_seconds - decode_start.backend_seconds;
  return result;
}

// The cost curve of speculation: the target's time per verify step and the draft's per proposed token, from which
// the speed-up at any acceptance rate follows.
struct SpeculationCost {
  double verify_seconds_per_step = 0;
  double draft_seconds_per_token = 0;
  double draft_seconds_per_step = 0;
};

SpeculationCost speculation_cost(const LatencyRun& run) {
  SpeculationCost cost;
  const double steps = static_cast<double>(run.decode_step_seconds.size());
  if (steps > 0) cost.verify_seconds_per_step = run.decode_backend_seconds / steps;
  if (run.draft.proposed_tokens > 0)
    cost.draft_seconds_per_token = run.draft.seconds / static_cast<double>(run.draft.proposed_tokens);
  if (run.draft.steps > 0) cost.draft_seconds_per_step = run.draft.seconds / static_cast<double>(run.draft.steps);
  return cost;
}

class LatencyBench {
 public:
  LatencyBench(Backend& backend, const LatencyFlags& f, const BackendOptions& options, const SamplingParams& sampling)
      : backend_(backend), f_(f), options_(options), sampling_(sampling) {
    const int block_size = backend.kv_cache().block_size;
    const int blocks_per_sequence = (f.input_len + f.output_len + block_size - 1) / block_size;
    if (static_cast<int64_t>(blocks_per_sequence) * f.batch > backend.kv_cache().num_blocks)
      throw Error(ErrorKind::kOutOfMemory, "bench latency: " + std::to_string(f.batch) + " sequences of " +
                                               std::to_string(f.input_len + f.output_len) + " tokens need " +
                                               std::to_string(blocks_per_sequence * f.batch) +
                                               " KV blocks, the cache has " +
                                               std::to_string(backend.kv_cache().num_blocks));
    for (int s = 0; s < f.batch; ++s) {
      prompts_.push_back(bench_prompt(f.input_len, s, backend.config().vocab_size, f.prompt_period));
      std::vector<int32_t> table(static_cast<size_t>(blocks_per_sequence));
      for (int b = 0; b < blocks_per_sequence; ++b) table[static_cast<size_t>(b)] = s * blocks_per_sequence + b;
      tables_.push_back(std::move(table));
    }
    outputs_.resize(static_cast<size_t>(f.batch));
  }

  // Prefill of every prompt in batches of at most max_num_batched_tokens, then output_len - 1 decode steps.
  LatencyRun run(int input_len, int output_len) {
    LatencyRun result;
    for (auto& output : outputs_) output.clear();
    penalty_tokens_.clear();
    for (const auto& prompt : prompts_) penalty_tokens_.emplace_back(sampling_, prompt);
    std::vector<int32_t> last_tokens(static_cast<size_t>(f_.batch));
    std::vector<int> prefilled(static_cast<size_t>(f_.batch), 0);
    const auto start = Clock::now();
    int next = 0;
    while (next < f_.batch) {
      Batch batch;
      std::vector<int> members;
      int budget = options_.max_num_batched_tokens;
      for (int s = next; s < f_.batch && budget > 0 && static_cast<int>(members.size()) < options_.max_num_seqs; ++s) {
        const int n = std::min(budget, input_len - prefilled[static_cast<size_t>(s)]);
        const int done = prefilled[static_cast<size_t>(s)];
        const auto& prompt = prompts_[static_cast<size_t>(s)];
        batch.token_ids.insert(batch.token_ids.end(), prompt.begin() + done, prompt.begin() + done + n);
        batch.sequences.push_back(sequence(s, n, done, done + n == input_len, 0));
        members.push_back(s);
        budget -= n;
      }
      const std::vector<SampleResult> sampled = backend_.step(batch);
      size_t r = 0;
      for (size_t i = 0; i < members.size(); ++i) {
        const int s = members[i];
        prefilled[static_cast<size_t>(s)] += batch.sequences[i].num_tokens;
        if (batch.sequences[i].sample) {
          last_tokens[static_cast<size_t>(s)] = sampled[r++].token;
          record_output(s, last_tokens[static_cast<size_t>(s)]);
          if (s == 0) result.ttft_seconds = seconds_since(start);
        }
        if (prefilled[static_cast<size_t>(s)] == input_len) next = std::max(next, s + 1);
      }
    }
    result.prefill_seconds = seconds_since(start);

    for (int step = 1; step < output_len; ++step) {
      Batch batch;
      batch.token_ids = last_tokens;
      for (int s = 0; s < f_.batch; ++s) batch.sequences.push_back(sequence(s, 1, input_len + step - 1, true, step));
      const auto step_start = Clock::now();
      const std::vector<SampleResult> sampled = backend_.step(batch);
      result.decode_step_seconds.push_back(seconds_since(step_start));
      for (int s = 0; s < f_.batch; ++s) {
        last_tokens[static_cast<size_t>(s)] = sampled[static_cast<size_t>(s)].token;
        record_output(s, last_tokens[static_cast<size_t>(s)]);
      }
      result.decode_tokens += f_.batch;
    }
    return result;
  }

 private:
  void record_output(int s, int32_t token) {
    outputs_[static_cast<size_t>(s)].push_back(token);
    penalty_tokens_[static_cast<size_t>(s)].add_output(token);
  }

  // The prompt of a sequence is its whole prompt even while a prefill chunk runs: only sampled steps read the history.
  BatchSequence sequence(int s, int num_tokens, int num_cached, bool sample, int step) const {
    BatchSequence seq;
    seq.num_tokens = num_tokens;
    seq.num_cached = num_cached;
    seq.block_table = tables_[static_cast<size_t>(s)];
    seq.slot = s;  // each sequence keeps its table for the whole benchmark: one generation, as the engine's would
    seq.table_generation = 1;
    seq.sample = sample;
    seq.sampling = &sampling_;
    seq.history = {prompts_[static_cast<size_t>(s)], outputs_[static_cast<size_t>(s)]};
    seq.penalty_tokens = &penalty_tokens_[static_cast<size_t>(s)];
    seq.sample_step = static_cast<uint64_t>(step);
    return seq;
  }

  Backend& backend_;
  const LatencyFlags& f_;
  BackendOptions options_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<int32_t>> outputs_;  // tokens sampled so far per sequence: the penalties' history
  std::vector<PenaltyTokens> penalty_tokens_;  // the same as the engine keeps it
  SamplingParams sampling_;
};

// Tensor parallelism: the ranks' all-reduce at a decode step's size (hidden x batch fp32), timed alone; a decode step
// makes one after the embedding and two per layer (o_proj, down). nullopt for a backend without ranks.
struct AllReduceCost {
  int ranks = 0;
  int64_t bytes = 0;
  double seconds = 0;
  int per_step = 0;
};

std::optional<AllReduceCost> measure_all_reduce([[maybe_unused]] Backend& backend, [[maybe_unused]] int batch) {
#ifdef QINFER_HAVE_CUDA
  if (auto* ranks = dynamic_cast<TensorParallelCudaBackend*>(&backend)) {
    const ModelConfig& c = backend.config();
    const size_t elements = static_cast<size_t>(c.hidden_size) * static_cast<size_t>(batch);
    return AllReduceCost{ranks->tensor_parallel_size(), static_cast<int64_t>(elements * sizeof(float)),
                         ranks->time_all_reduce(elements, 200), 2 * c.num_layers + 1};
  }
#endif
  return std::nullopt;
}

void run_latency(const LatencyFlags& f) {
  if (f.batch < 1 || f.input_len < 1 || f.output_len < 1)
    throw Error(ErrorKind::kInvalidArgument, "--batch, --input-len and --output-len must be at least 1");
  auto model = load_model_from_flags(f.model);
  const SamplingParams greedy{.temperature = 0};
  const SamplingParams sampling = sampling_params_from_flags(f.sampling, greedy, model->config.vocab_size);
  SpeculativeBackends backends =
      create_backends(model, f.model, f.backend, parse_speculative_config(f.speculative_config));
  Backend* backend = backends.target.get();
  const ModelConfig& c = backend->config();
  if (f.input_len + f.output_len > backend->max_model_len())
    throw Error(ErrorKind::kInvalidArgument,
                "--input-len + --output-len = " + std::to_string(f.input_len + f.output_len) +
                    " exceeds the context of " + std::to_string(backend->max_model_len()));
  LatencyBench bench(*backend, f, f.backend, sampling);
  const bool speculative = !f.speculative_config.empty();
  auto measure = [&](int input_len, int output_len) {
    return speculative ? run_through_engine(*backend, backends.draft.get(), f, sampling, input_len, output_len)
                       : bench.run(input_len, output_len);
  };
  spdlog::info("bench latency: warm-up");
  measure(std::min(f.input_len, 16), std::min(f.output_len, 3));
  spdlog::info("bench latency: batch {}, input {}, output {}", f.batch, f.input_len, f.output_len);
  const LatencyRun run = measure(f.input_len, f.output_len);
  double decode_seconds = 0;
  for (double s : run.decode_step_seconds) decode_seconds += s;
  // Tokens per sequence per decode step: 1 without speculation.
  const double tokens_per_step =
      run.decode_step_seconds.empty()
          ? 0
          : static_cast<double>(run.decode_tokens) / f.batch / static_cast<double>(run.decode_step_seconds.size());
  const SpeculationStats& spec = run.speculation;
  const SpeculationCost cost = speculation_cost(run);

  std::vector<double> steps = run.decode_step_seconds;
  std::sort(steps.begin(), steps.end());
  const double median = steps.empty() ? 0 : steps[steps.size() / 2];
  double mean = 0;
  for (double s : steps) mean += s / static_cast<double>(steps.size());
  // Bytes one decode step must read: every weight once, as the backend holds it (bf16, or packed quantized codes and
  // their scales), plus each sequence's K and V at its mean context.
  const std::optional<int64_t> held_weights = backend->memory_plan().weights;
  const double weight_bytes =
      held_weights ? static_cast<double>(*held_weights) : static_cast<double>(c.num_parameters()) * 2;
  const double mean_context = f.input_len + (f.output_len - 1) / 2.0;
  // KV bytes per (token, layer, K or V): one vector per KV head, as the GPU stores it.
  const KvCacheShape kv = backend->kv_cache();
  const double kv_token_bytes =
      static_cast<double>(c.num_kv_heads) * static_cast<double>(kv_cache_vector_bytes(kv.dtype, c.head_dim));
  const double kv_bytes = f.batch * mean_context * c.num_layers * 2.0 * kv_token_bytes;
  const double step_bytes = weight_bytes + kv_bytes;
  const double bandwidth = median > 0 ? step_bytes / median : 0;
  int64_t memory = -1;
#ifdef QINFER_HAVE_CUDA
  if (backend->name().rfind("cuda", 0) == 0) memory = cuda_memory_in_use_bytes();
#endif
  const double prefill_tokens = static_cast<double>(f.batch) * f.input_len;

  const std::optional<AllReduceCost> all_reduce = measure_all_reduce(*backend, f.batch);
  if (f.json) {
    nlohmann::json j = {{"device", backend->name()},
                        {"kv_cache_dtype", kv_cache_dtype_name(kv.dtype)},
                        {"batch", f.batch},
                        {"input_len", f.input_len},
                        {"output_len", f.output_len},
                        {"sampling",
                         {{"temperature", sampling.temperature},
                          {"top_k", sampling.top_k},
                          {"top_p", sampling.top_p},
                          {"min_p", sampling.min_p},
                          {"repetition_penalty", sampling.repetition_penalty},
                          {"presence_penalty", sampling.presence_penalty},
                          {"frequency_penalty", sampling.frequency_penalty},
                          {"top_logprobs", sampling.num_top_logprobs}}},
                        {"prefill_seconds", run.prefill_seconds},
                        {"prefill_tokens_per_second", prefill_tokens / run.prefill_seconds},
                        {"ttft_seconds", run.ttft_seconds},
                        {"decode_steps", steps.size()},
                        {"decode_step_seconds_median", median},
                        {"decode_step_seconds_mean", mean},
                        {"decode_tokens_per_second_per_sequence", median > 0 ? 1.0 / median : 0.0},
                        {"decode_tokens_per_second", median > 0 ? f.batch / median : 0.0},
                        {"decode_bytes_per_step", step_bytes},
                        {"decode_bandwidth_bytes_per_second", bandwidth},
                        {"decode_fraction_of_copy_bandwidth", bandwidth / kCopyBandwidthBytesPerSecond},
                        {"gpu_memory_in_use_bytes", memory}};
    if (all_reduce) {
      j["tensor_parallel"] = {{"size", all_reduce->ranks},
                              {"all_reduce_bytes", all_reduce->bytes},
                              {"all_reduce_seconds", all_reduce->seconds},
                              {"all_reduces_per_step", all_reduce->per_step},
                              {"all_reduce_seconds_per_step", all_reduce->seconds * all_reduce->per_step}};
    }
    if (speculative) {
      nlohmann::json& out = j["speculative"] = speculation_stats_json(spec);
      out["config"] = nlohmann::json::parse(f.speculative_config);
      out["decode_tokens"] = run.decode_tokens;
      out["decode_seconds"] = decode_seconds;
      out["decode_tokens_per_second"] = decode_seconds > 0 ? run.decode_tokens / decode_seconds : 0.0;
      out["tokens_per_sequence_step"] = tokens_per_step;
      out["verify_seconds_per_step"] = cost.verify_seconds_per_step;
      if (backends.draft) {
        out["draft"] = {{"steps", run.draft.steps},
                        {"proposed_tokens", run.draft.proposed_tokens},
                        {"catch_up_tokens", run.draft.catch_up_tokens},
                        {"seconds", run.draft.seconds},
                        {"seconds_per_proposed_token", cost.draft_seconds_per_token},
                        {"seconds_per_step", cost.draft_seconds_per_step},
                        {"first_step_seconds", run.draft_first_step.seconds},
                        {"first_step_catch_up_tokens", run.draft_first_step.catch_up_tokens},
                        {"device", backends.draft->name()},
                        {"weights_bytes", backends.draft->memory_plan().weights.value_or(-1)}};
      }
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("qinfer bench latency: %s, KV cache %s, batch %d, input %d, output %d\n", backend->name().c_str(),
              kv_cache_dtype_name(kv.dtype), f.batch, f.input_len, f.output_len);
  if (!sampling.greedy() || sampling.has_penalties() || sampling.num_top_logprobs > 0)
    std::printf(
        "  sampling: temperature %g, top-k %d, top-p %g, min-p %g, penalties repetition %g / presence %g / frequency "
        "%g, %d top logprobs\n",
        sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p, sampling.repetition_penalty,
        sampling.presence_penalty, sampling.frequency_penalty, sampling.num_top_logprobs);
  std::printf("  prefill: %.0f tokens in %.2f ms = %.1f K tok/s; TTFT %.2f ms\n", prefill_tokens,
              run.prefill_seconds * 1e3, prefill_tokens / run.prefill_seconds / 1e3, run.ttft_seconds * 1e3);
  if (!steps.empty()) {
    std::printf("  decode:  %zu steps, median %.3f ms/step (mean %.3f): %.1f tok/s per sequence, %.1f tok/s total\n",
                steps.size(), median * 1e3, mean * 1e3, 1.0 / median, f.batch / median);
    std::printf("           %.2f GB read per step (weights %.2f + KV %.2f): %.2f TB/s = %.1f %% of 4.27 TB/s\n",
                step_bytes / 1e9, weight_bytes / 1e9, kv_bytes / 1e9, bandwidth / 1e12,
                100 * bandwidth / kCopyBandwidthBytesPerSecond);
  }
  if (all_reduce)
    std::printf("  tensor parallel: %d ranks; an all-reduce of %lld bytes %.1f us alone, %d per decode step: %.3f ms\n",
                all_reduce->ranks, static_cast<long long>(all_reduce->bytes), all_reduce->seconds * 1e6,
                all_reduce->per_step, all_reduce->seconds * all_reduce->per_step * 1e3);
  if (speculative) {
    std::string per_position;
    for (uint64_t n : spec.accepted_per_position)
      per_position += (per_position.empty() ? "" : " / ") + std::to_string(n);
    std::printf("  speculative: %.2f tokens per sequence step, %.1f tok/s total over %.2f s of decode steps\n",
                tokens_per_step, decode_seconds > 0 ? run.decode_tokens / decode_seconds : 0.0, decode_seconds);
    std::printf(
        "               %llu tokens proposed, %llu accepted (%.1f %%), mean accepted length %.2f; accepted "
        "by position: %s\n",
        static_cast<unsigned long long>(spec.draft_tokens), static_cast<unsigned long long>(spec.accepted_tokens),
        spec.draft_tokens > 0 ? 100.0 * spec.accepted_tokens / spec.draft_tokens : 0.0, spec.mean_accepted_length(),
        per_position.empty() ? "-" : per_position.c_str());
    std::printf("               verify: %.3f ms per decode step in the target's backend\n",
                cost.verify_seconds_per_step * 1e3);
    if (backends.draft)
      std::printf(
          "               draft: %.3f ms per proposed token (%llu proposals, %llu draft steps of %.3f ms, %llu "
          "tokens caught up)\n",
          cost.draft_seconds_per_token * 1e3, static_cast<unsigned long long>(run.draft.proposed_tokens),
          static_cast<unsigned long long>(run.draft.steps), cost.draft_seconds_per_step * 1e3,
          static_cast<unsigned long long>(run.draft.catch_up_tokens));
  }
  if (memory >= 0) std::printf("  GPU memory in use: %.2f GiB\n", static_cast<double>(memory) / (1u << 30));
}

void register_bench_latency(CLI::App& bench) {
  auto f = std::make_shared<LatencyFlags>();
  CLI::App* cmd = bench.add_subcommand("latency", "Prefill and decode latency of fixed-shape batches");
  add_model_flags(*cmd, f->model);
  add_backend_flags(*cmd, f->backend);
  cmd->add_option("--batch", f->batch, "Sequences decoded together")->capture_default_str();
  cmd->add_option("--input-len", f->input_len, "Prompt tokens per sequence")->capture_default_str();
  cmd->add_option("--output-len", f->output_len, "Generated tokens per sequence")->capture_default_str();
  add_sampling_flags(*cmd, f->sampling, "greedy: temperature 0, top-k and top-p off");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->add_option("--prompt-period", f->prompt_period,
                  "Each prompt repeats its first N tokens (0: no repeats), so n-gram proposals have matches")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_speculative_config_flag(*cmd, f->speculative_config);
  cmd->add_flag("--fixed-speculative-tokens", f->fixed_speculative_tokens,
                "With --speculative-config: propose num_speculative_tokens every step whatever is accepted (no "
                "adaptation), to measure the cost curve of verifying and drafting at that k");
  cmd->callback([f] {
    if (f->fixed_speculative_tokens && f->speculative_config.empty())
      throw CLI::ValidationError("--fixed-speculative-tokens", "needs --speculative-config");
    run_latency(*f);
  });
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  register_bench_latency(*bench);
  register_bench_throughput(*bench);
  register_bench_serve(*bench);
}

}  // namespace qinfer::cli
