// Draft-model proposals: a second, smaller model of the same vocabulary (its own Backend, on the same device, with its
// own KV pools indexed by the target's block ids) proposes a sequence's next tokens one at a time. Before proposing it
// catches up on every token the sequence gained since it last ran (the accepted proposals and the token sampled after
// them; the whole prompt the first time), batched over all sequences that speculate in the step.
//
// Contract: engine thread only. The draft backend must outlive the proposer and have the target's block size and at
// least its number of blocks; the sequences' block tables must cover every position the draft writes (the scheduler
// reserves the proposals' slots before it asks).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/sequence.h"

namespace qinfer {

// One sequence the draft proposes for: `num_tokens` proposals into speculation.drafts, or, for a shadow request
// (speculation off, measuring), one proposal into speculation.shadow_token.
struct DraftRequest {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;
  bool shadow = false;
};

struct DraftStats {
  uint64_t steps = 0;            // draft backend steps
  uint64_t proposed_tokens = 0;  // proposals made (shadow ones included)
  uint64_t catch_up_tokens = 0;  // known tokens fed to the draft (prompts and accepted tokens)
  double seconds = 0;            // wall time of the draft's steps, host sampling included

  DraftStats since(const DraftStats& earlier) const;
};

class DraftModelProposer {
 public:
  // `max_num_seqs` / `max_num_batched_tokens`: the limits the draft backend was created with.
  DraftModelProposer(Backend& draft, int32_t max_num_seqs, int32_t max_num_batched_tokens);

  // Fills the requests' proposals. A greedy request proposes the draft's argmax (the draft backend samples); a sampled
  // one draws from the draft's distribution q with the request's sampling parameters and draft_proposal_seed, on the
  // host, and keeps q in speculation.draft_distributions for rejection sampling.
  void propose(std::span<const DraftRequest> requests);

  const DraftStats& stats() const { return stats_; }

 private:
  struct Pending {
    const DraftRequest* request;
    SamplingParams sampling;       // the request's, with the draft's seed and no top logprobs
    std::vector<int32_t> history;  // output then the proposals so far: the penalties' history
    int32_t next_position = 0;     // the next position to feed
    int32_t produced = 0;          // proposals made
  };
  // One draft step over the pending sequences that fit; returns false when none was left.
  bool run_step(std::vector<Pending>& pending);

  Backend& draft_;
  int32_t max_num_seqs_;
  int32_t max_num_batched_tokens_;
  DraftStats stats_;
};

}  // namespace qinfer
