// One sample of one request as the scheduler sees it: its tokens, how many of them are in the KV cache, and the KV
// blocks it holds. Plain data; the Scheduler and BlockManager mutate it on the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/sampling.h"
#include "engine/speculation.h"
#include "grammar/scoped_matcher.h"

namespace qinfer {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

enum class FinishReason {
  kNone,
  kStop,      // eos / stop token id / stop string
  kLength,    // max_tokens or max_model_len
  kAbort,     // abort(id)
  kDeadline,  // the request's deadline passed
  kError,     // the backend failed on this sequence's batch
};

// "stop", "length", "abort", "deadline", "error" ("" for kNone).
const char* finish_reason_name(FinishReason reason);

using Clock = std::chrono::steady_clock;

struct Sequence {
  uint64_t id = 0;  // unique, increasing in arrival order: the FCFS key
  uint64_t request_id = 0;
  int32_t sample_index = 0;  // which of the request's n samples
  int32_t priority = 0;      // lower is served first under the priority policy

  std::vector<int32_t> tokens;  // prompt then generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t num_computed = 0;            // leading tokens whose K/V are in the cache
  std::vector<int32_t> block_table;    // KV block ids, ceil(num_computed / block_size) of them between steps
  std::vector<uint64_t> block_hashes;  // chained hashes of the leading full blocks of `tokens` (a pure function)
  int32_t num_registered_blocks = 0;   // leading blocks already offered to the prefix cache
  // The batch's BatchSequence::slot and table_generation: the scheduler gives a running sequence a slot of its own
  // (-1 while it is not running); BlockManager::allocate gives every table it builds a generation never used before.
  int32_t slot = BatchSequence::kNoSlot;
  uint64_t table_generation = 0;

  SamplingParams sampling;
  PenaltyTokens penalty_tokens;  // the history's penalty list, updated with every generated token
  int32_t max_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // stop even when ignore_eos is set
  std::optional<Clock::time_point> deadline;
  // Constrained decoding: the sample's position in its constraint (null: none), the bitmask of the tokens it allows
  // next ((vocab + 31) / 32 words, filled before each sampling step), and the request's logit_bias.
  std::unique_ptr<grammar::ScopedMatcher> matcher;
  std::vector<uint32_t> allowed_tokens;
  std::vector<LogitBias> logit_bias;
  SpeculationState speculation;  // proposals and their adaptive count (unused without speculative decoding)

  // Samples 1..n-1 of a request wait until sample 0 has computed the prompt, then share its full prompt blocks.
  const Sequence* fork_parent = nullptr;

  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  bool admitted_before = false;
  int32_t num_cached_prompt_tokens = 0;  // prompt tokens served from shared blocks at first admission
  int32_t num_preemptions = 0;
  uint64_t scheduled_in_step = 0;  // the scheduler's step counter when last scheduled

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return {tokens.data(), static_cast<size_t>(num_prompt_tokens)}; }
  std::span<const int32_t> output() const {
    return {tokens.data() + num_prompt_tokens, static_cast<size_t>(num_output_tokens())};
  }
  bool finished() const { return status == SequenceStatus::kFinished; }
};

}  // namespace qinfer
