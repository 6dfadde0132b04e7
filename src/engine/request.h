// What a client hands the engine (GenerationRequest) and what it gets back (a RequestStream of deltas).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampling.h"
#include "engine/sequence.h"
#include "grammar/compiled_grammar.h"
#include "grammar/scoped_matcher.h"

namespace qinfer {

// The most parallel samples (`n`, `best_of`) one request may ask for: the API and the engine check this one limit.
inline constexpr int32_t kMaxSamplesPerRequest = 64;

struct GenerationRequest {
  std::vector<int32_t> prompt;        // token ids
  SamplingParams sampling;            // its seed field is ignored: see `seed`
  std::optional<uint64_t> seed;       // sample i draws with seed + i; absent: a fresh random seed
  std::optional<int32_t> max_tokens;  // absent: up to max_model_len
  int32_t n = 1;                      // parallel samples sharing the prompt's KV blocks
  bool ignore_eos = false;            // ignore the model's eos ids (stop_token_ids still stop)
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings; need a text decoder
  bool logprobs = false;          // return the chosen token's logprob (and sampling.num_top_logprobs alternatives)
  int32_t priority = 0;           // lower first, under --scheduling-policy priority
  // Constrained decoding: every sample's tokens follow this grammar (compiled for the engine's vocabulary; its stop
  // ids are allowed only where it is complete). Null: unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  // Where in the output the constraint applies (default: all of it): after a reasoning span, or from a trigger token
  // on.
  grammar::ConstraintScope constraint_scope;
  std::vector<LogitBias> logit_bias;  // OpenAI logit_bias: distinct ids in the vocabulary, biases in [-100, 100]
  std::optional<Clock::time_point> deadline;  // finished with reason "deadline" once passed
  // Called on the engine thread after new deltas are queued. Must return quickly and never block or throw
  // (e.g. wake an event loop). May be empty.
  std::function<void()> on_output;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // summed over the n samples
  int32_t cached_tokens = 0;      // prompt tokens served from the prefix cache
};

// New output of one sample since its previous delta.
struct StreamDelta {
  int32_t index = 0;  // which of the n samples
  std::vector<int32_t> token_ids;
  std::string text;                     // empty without a text decoder
  std::vector<TokenLogprobs> logprobs;  // one per token id, when requested
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // for FinishReason::kError
};

// Single producer (the engine thread), any number of consumer threads. Deltas are queued without bound, so the
// engine never waits for a slow reader.
class RequestStream {
 public:
  explicit RequestStream(uint64_t request_id) : request_id_(request_id) {}
  uint64_t request_id() const { return request_id_; }

  // Moves every queued delta into `out` (appending). Waits until at least one is queued or the request is done,
  // at most `timeout` when given (zero: never waits). Returns false once the request is done and nothing is left.
  bool wait_drain(std::vector<StreamDelta>& out, std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // True when every sample finished and all deltas were drained.
  bool done() const;
  // Final usage once the request is done; before that, the prompt tokens only.
  Usage usage() const;
  // When the engine first put one of the request's sequences into a batch (its queue time ends there); empty before.
  std::optional<std::chrono::steady_clock::time_point> first_scheduled() const;

  // Engine side.
  void push(StreamDelta delta);
  void set_usage(const Usage& usage);
  void mark_scheduled(std::chrono::steady_clock::time_point when);  // keeps the first time only
  void close();

 private:
  const uint64_t request_id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamDelta> deltas_;
  Usage usage_;
  std::optional<std::chrono::steady_clock::time_point> first_scheduled_;
  bool closed_ = false;
};

}  // namespace qinfer
