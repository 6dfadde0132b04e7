// Speculative decoding: what the engine is configured with, the per-sequence state that adapts how many tokens a
// sequence proposes, and the counters behind the spec-decode metrics. The acceptance rule lives in the scheduler's
// postprocess (docs/ENGINE.md, "Speculative decoding").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/sampling.h"
#include "engine/ngram_proposer.h"

namespace qinfer {

enum class SpeculativeMethod { kNone, kNgram, kDraftModel };

inline constexpr int32_t kMaxSpeculativeTokens = 16;
// A draft model's shadow proposal (while a sequence's speculation is off) costs a draft step, unlike an n-gram
// lookup: it is made every this many output tokens only, so that an off sequence pays about 1/8 of a draft step per
// token (the catch-up of the tokens in between is one chunk).
inline constexpr int32_t kDraftShadowInterval = 8;

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 0;  // k: tokens proposed per step, at most, in [1, kMaxSpeculativeTokens]
  int32_t prompt_lookup_min = 1;       // n-gram: the shortest suffix looked up in the prompt and output
  int32_t prompt_lookup_max = 4;       // n-gram: the longest
  // A step in which more sequences decode than this runs without speculation: verifying costs more there than it
  // saves (0: no limit).
  int32_t disable_by_batch_size = 8;
  // false (`bench latency --fixed-speculative-tokens`): every speculating sequence proposes num_speculative_tokens each
  // step whatever verification accepted, so that a run measures the cost curve (verify and draft cost at that k) even
  // where proposals are never right, as with random weights.
  bool adaptive = true;
  // draft_model: the draft checkpoint (a directory or ORG/NAME) and, for dummy weights, its config.json. The CLI loads
  // it; the engine is given the draft's backend.
  std::string draft_model;
  std::string draft_config;

  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

// "ngram", "draft_model" (or "none").
const char* speculative_method_name(SpeculativeMethod method);

// One sequence's speculation. `k` is how many tokens it may propose next (0: off, measuring only); it adapts to
// what verification accepted, and recovers from off when the proposal it would have made comes true.
struct SpeculationState {
  int32_t k = 0;
  std::vector<int32_t> drafts;         // the proposals of the step in flight
  NgramIndex ngram_index;              // n-gram method: the index of the sequence's tokens
  std::vector<int32_t> verify_output;  // output then drafts: the penalty history the verified positions see
  int32_t shadow_token = -1;           // while off: the token it would have proposed first (-1: none)
  // Draft model: leading tokens whose K/V the draft's own cache holds for this sequence (same block ids as the
  // target's), and, for a sampled request, the distribution each proposal was drawn from (q of rejection sampling).
  int32_t draft_num_computed = 0;
  int32_t draft_marked_blocks = 0;  // leading blocks BlockManager::mark_draft_computed has marked
  bool shadow_pending = false;      // draft model, while off: the draft is to propose one token for shadow_token
  std::vector<SamplingDistribution> draft_distributions;

  // After verifying `proposed` tokens of which the leading `accepted` matched: all accepted grows k by one (up to
  // max_k), some accepted sets it to that many, none halves it (1 becomes off).
  void adapt_after_verify(int32_t proposed, int32_t accepted, int32_t max_k);
  // While off: the sampled token. A correct shadow proposal turns speculation back on with one token.
  void adapt_after_shadow(int32_t sampled);
};

// Counters over all verified steps (one sequence in one step is one verification).
struct SpeculationStats {
  uint64_t verifications = 0;
  uint64_t draft_tokens = 0;                    // proposed tokens verified
  uint64_t accepted_tokens = 0;                 // of them, kept as output
  std::vector<uint64_t> accepted_per_position;  // [k]: how often the proposal at position i was kept

  void record(int32_t proposed, int32_t accepted);
  // Tokens one verification produces on average: the accepted proposals plus the sampled token after them.
  double mean_accepted_length() const;
  // What was counted after `earlier` (a snapshot of the same counters).
  SpeculationStats since(const SpeculationStats& earlier) const;
};

}  // namespace qinfer
