// qinfer generate: one prompt, one sequence, printed as text or one JSON object.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>

#include "backend/backend.h"
#include "backend/factory.h"
#include "cli/commands.h"
#include "cli/draft_model.h"
#include "cli/engine_flags.h"
#include "cli/model_loading.h"
#include "cli/sampling_flags.h"
#include "cli/speculative_config.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct GenerateFlags {
  ModelFlags model;
  BackendOptions backend;
  std::string prompt_ids;
  std::string prompt;
  int max_tokens = 16;
  SamplingFlags sampling;
  bool ignore_eos = false;
  bool json = false;
  std::string speculative_config;
};

struct Generated {
  std::vector<int32_t> output;
  std::vector<SampleResult> results;
  std::string finish_reason = "length";
  double prefill_ms = 0;
};

// The plain loop straight on the backend: the whole prompt in one step, then one token per step.
Generated generate_plainly(Backend& backend, const GenerateFlags& f, const std::vector<int32_t>& prompt,
                           const SamplingParams& sp) {
  const KvCacheShape kv = backend.kv_cache();
  const int64_t total = static_cast<int64_t>(prompt.size()) + f.max_tokens;
  std::vector<int32_t> block_table(static_cast<size_t>((total + kv.block_size - 1) / kv.block_size));
  std::iota(block_table.begin(), block_table.end(), 0);
  const std::vector<int32_t>& eos = backend.config().eos_token_ids;
  Generated generated;
  Batch batch;
  batch.token_ids = prompt;
  BatchSequence seq;
  seq.num_tokens = static_cast<int32_t>(prompt.size());
  seq.block_table = block_table;
  seq.slot = 0;  // one sequence over the same table for the whole run: one generation
  seq.table_generation = 1;
  seq.sample = true;
  seq.sampling = &sp;
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int>(generated.output.size()) < f.max_tokens) {
    seq.history = {prompt, generated.output};
    seq.sample_step = generated.output.size();
    batch.sequences = {seq};
    SampleResult r = backend.step(batch).at(0);
    generated.output.push_back(r.token);
    generated.results.push_back(r);
    if (generated.output.size() == 1) generated.prefill_ms = ms_since(start);
    if (std::find(eos.begin(), eos.end(), r.token) != eos.end() && !f.ignore_eos) {
      generated.finish_reason = "stop";
      break;
    }
    seq.num_cached += seq.num_tokens;
    seq.num_tokens = 1;
    batch.token_ids = {r.token};
  }
  return generated;
}

// With --speculative-config the sequence runs through the engine, which proposes and verifies tokens; its outputs
// are those of the plain loop, token for token.
Generated generate_speculatively(Backend& backend, Backend* draft, const GenerateFlags& f,
                                 const std::vector<int32_t>& prompt, const SamplingParams& sp) {
  EngineOptions options = engine_options_from_flags(f.backend, EngineFlags{});
  options.speculation = parse_speculative_config(f.speculative_config);
  if (draft != nullptr) options.max_model_len = std::min(backend.max_model_len(), draft->max_model_len());
  Engine engine(backend, options, draft);
  GenerationRequest request;
  request.prompt = prompt;
  request.sampling = sp;
  request.seed = sp.seed;
  request.max_tokens = f.max_tokens;
  request.ignore_eos = f.ignore_eos;
  request.logprobs = true;
  RequestHandle handle = engine.submit(request);
  Generated generated;
  const auto start = std::chrono::steady_clock::now();
  std::vector<StreamDelta> deltas;
  while (engine.step() || engine.has_work()) {
    handle.stream->wait_drain(deltas, std::chrono::milliseconds(0));
    if (generated.prefill_ms == 0 && !deltas.empty()) generated.prefill_ms = ms_since(start);
  }
  handle.stream->wait_drain(deltas, std::chrono::milliseconds(0));
  for (const StreamDelta& delta : deltas) {
    if (!delta.error.empty()) throw Error(ErrorKind::kInternal, "generation failed: " + delta.error);
    for (const TokenLogprobs& lp : delta.logprobs) {
      generated.output.push_back(lp.token);
      generated.results.push_back({lp.token, lp.logprob, lp.top});
    }
    if (delta.finish_reason != FinishReason::kNone) generated.finish_reason = finish_reason_name(delta.finish_reason);
  }
  const EngineStats stats = engine.stats();
  const SpeculationStats& spec = stats.scheduler.speculation;
  spdlog::info("speculative decoding: {} tokens in {} steps; {} proposed, {} accepted; mean accepted length {:.2f}",
               generated.output.size(), stats.scheduler.steps, spec.draft_tokens, spec.accepted_tokens,
               spec.mean_accepted_length());
  return generated;
}

std::vector<int32_t> parse_ids(const std::string& text, int vocab_size) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw Error(ErrorKind::kInvalidArgument, "--prompt-ids: '" + item + "' is not an integer");
    if (v < 0 || v >= vocab_size)
      throw Error(ErrorKind::kInvalidArgument, "--prompt-ids: id " + item + " at index " + std::to_string(ids.size()) +
                                                   " is outside the vocabulary [0, " + std::to_string(vocab_size) +
                                                   ")");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw Error(ErrorKind::kInvalidArgument, "--prompt-ids is empty");
  return ids;
}

void run_generate(const GenerateFlags& f) {
  auto model = load_model_from_flags(f.model);
  const ModelConfig& config = model->config;
  if (f.prompt_ids.empty() == f.prompt.empty())
    throw Error(ErrorKind::kInvalidArgument, "give exactly one of --prompt and --prompt-ids");
  std::optional<Tokenizer> tokenizer;
  if (auto dir = find_tokenizer_dir(f.model)) tokenizer = Tokenizer::from_model_dir(*dir);
  if (!f.prompt.empty() && !tokenizer)
    throw Error(ErrorKind::kNotFound,
                "--prompt needs a tokenizer.json: none in the model directory (use --tokenizer DIR)");
  std::vector<int32_t> prompt =
      f.prompt.empty() ? parse_ids(f.prompt_ids, config.vocab_size) : tokenizer->encode(f.prompt);
  if (prompt.empty()) throw Error(ErrorKind::kInvalidArgument, "--prompt encodes to no tokens");
  if (f.max_tokens < 1) throw Error(ErrorKind::kInvalidArgument, "--max-tokens must be at least 1");

  SamplingParams model_defaults;
  model_defaults.temperature = static_cast<float>(config.generation.temperature);
  model_defaults.top_p = static_cast<float>(config.generation.top_p);
  model_defaults.top_k = config.generation.top_k;
  model_defaults.min_p = static_cast<float>(config.generation.min_p);
  const SamplingParams sp = sampling_params_from_flags(f.sampling, model_defaults, config.vocab_size);

  SpeculativeBackends backends =
      create_backends(model, f.model, f.backend, parse_speculative_config(f.speculative_config));
  Backend* backend = backends.target.get();
  const int64_t total = static_cast<int64_t>(prompt.size()) + f.max_tokens;
  if (total > backend->max_model_len())
    throw Error(ErrorKind::kInvalidArgument, "prompt (" + std::to_string(prompt.size()) + " tokens) + --max-tokens (" +
                                                 std::to_string(f.max_tokens) + ") = " + std::to_string(total) +
                                                 " exceeds the context of " + std::to_string(backend->max_model_len()));
  const KvCacheShape kv = backend->kv_cache();
  const int64_t blocks = (total + kv.block_size - 1) / kv.block_size;
  if (blocks > kv.num_blocks)
    throw Error(ErrorKind::kOutOfMemory, "the sequence needs " + std::to_string(blocks) + " KV blocks, the cache has " +
                                             std::to_string(kv.num_blocks));
  const auto start = std::chrono::steady_clock::now();
  const Generated generated = f.speculative_config.empty()
                                  ? generate_plainly(*backend, f, prompt, sp)
                                  : generate_speculatively(*backend, backends.draft.get(), f, prompt, sp);
  const std::vector<int32_t>& output = generated.output;
  const std::vector<SampleResult>& results = generated.results;
  const std::string& finish_reason = generated.finish_reason;
  const double prefill_ms = generated.prefill_ms;
  const double total_ms = ms_since(start);
  spdlog::info("prefill: {} tokens in {:.1f} ms ({:.1f} tok/s); decode: {} tokens in {:.1f} ms ({:.2f} tok/s)",
               prompt.size(), prefill_ms, 1e3 * static_cast<double>(prompt.size()) / prefill_ms, output.size() - 1,
               total_ms - prefill_ms,
               1e3 * static_cast<double>(output.size() - 1) / std::max(1e-9, total_ms - prefill_ms));
  const std::string text = tokenizer ? tokenizer->decode(output, /*skip_special_tokens=*/true) : "";
  if (f.json) {
    nlohmann::json logprobs = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json ids = nlohmann::json::array(), lps = nlohmann::json::array();
      for (const auto& t : r.top) {
        ids.push_back(t.token);
        lps.push_back(t.logprob);
      }
      logprobs.push_back({{"token", r.token}, {"logprob", r.logprob}, {"ids", ids}, {"logprobs", lps}});
    }
    nlohmann::json out = {
        {"token_ids", output}, {"text", text}, {"finish_reason", finish_reason}, {"logprobs", logprobs}};
    // Replacement characters for a sample that stopped inside a multi-byte character, instead of a throw.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < output.size(); ++i) line += (i ? "," : "") + std::to_string(output[i]);
    if (tokenizer)
      std::printf("%s\n", text.c_str());
    else
      std::printf("%s\n", line.c_str());
    std::fprintf(stderr, "finish_reason: %s\n", finish_reason.c_str());
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens for one prompt");
  add_model_flags(*cmd, f->model);
  add_backend_flags(*cmd, f->backend);
  cmd->add_option("--prompt", f->prompt, "Prompt text (needs the model's tokenizer.json)");
  cmd->add_option("--prompt-ids", f->prompt_ids, "Prompt as comma-separated token ids");
  cmd->add_option("--max-tokens", f->max_tokens, "Tokens to generate at most")->capture_default_str();
  add_sampling_flags(*cmd, f->sampling, "the model's generation_config");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  add_speculative_config_flag(*cmd, f->speculative_config);
  cmd->callback([f] { run_generate(*f); });
}

}  // namespace qinfer::cli
