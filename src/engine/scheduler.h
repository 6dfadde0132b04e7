// Continuous batching: each step picks which sequences run and how many of their tokens, within a token budget.
//
// Order of a step: running sequences that decode (one token each) first, then running sequences still in their
// prompt (chunked prefill), then waiting sequences in policy order while the budget, max_num_seqs and free blocks
// allow. Prefill chunks are capped by the partial-prefill limits (SchedulerOptions; docs/ENGINE.md says why): a chunk
// takes at most long_prefill_token_threshold tokens, and at most max_num_partial_prefills sequences (of them at most
// max_long_partial_prefills long ones) compute prompt tokens in one step, so short prompts pass a long one. A chunk
// after a long cached context is cut further by its estimated cost (prefill_attention_cost_ratio), and in a step that
// carries decodes the prefill chunks together are cut to what keeps the step within target_step_ms by a step time
// model calibrated from the times the caller records (record_step_time). When a
// running sequence needs a block and none is free, the lowest-ranked running sequence not yet scheduled in this step is
// preempted: its blocks are released and it goes back to waiting to be recomputed later (prompt plus generated tokens,
// usually hitting the prefix cache). Nothing is ever dropped.
//
// Contract: single-threaded (the engine thread). Sequences are owned by the caller and must outlive their stay here.
// The Batch returned by schedule() points into the sequences and stays valid until the next call that mutates them
// (postprocess, add, finish).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/block_manager.h"
#include "engine/draft_model_proposer.h"
#include "engine/prefill_cost.h"
#include "engine/sequence.h"
#include "engine/step_time_model.h"

namespace qinfer {

enum class SchedulingPolicy {
  kFcfs,      // arrival order
  kPriority,  // lower Sequence::priority first, then arrival
  kLpm,       // longest prefix-cache match first, then arrival
};

// "fcfs" | "priority" | "lpm"; throws Error(kInvalidArgument) otherwise.
SchedulingPolicy parse_scheduling_policy(const std::string& name);
const char* scheduling_policy_name(SchedulingPolicy policy);  // the inverse: "fcfs" | "priority" | "lpm"

struct SchedulerOptions {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;  // tokens per step
  int32_t max_model_len = 0;              // a sequence stops (length) when it reaches this many tokens
  bool enable_chunked_prefill = true;     // off: a prompt is admitted only when it fits the budget whole
  // Chunked prefill only. A prefill with more than this many prompt tokens left is long, and no chunk takes more than
  // this many tokens. 0: no threshold (vLLM's --long-prefill-token-threshold).
  int32_t long_prefill_token_threshold = 0;
  // Sequences that compute prompt tokens in one step, at most; of them long ones, at most. 0: no limit.
  int32_t max_num_partial_prefills = 0;
  int32_t max_long_partial_prefills = 0;
  // Chunked prefill only: attention FLOPs per (token, context token) over linear FLOPs per token (prefill_cost.h).
  // Above 0, a chunk after c cached tokens takes only as many tokens as cost no more than the chunk a fresh prompt
  // would get in its place, so late chunks of a long prompt shrink and the decodes beside them are not stalled.
  // 0: chunks are cut by token count alone.
  double prefill_attention_cost_ratio = 0;
  // Chunked prefill only: in a step with decodes, the prompt chunks together cost at most what the step time model
  // predicts fits in this many milliseconds beside the decodes, each chunk still taking min_latency_chunk tokens (or
  // what its prompt has left) so every prompt finishes. A step without decodes uses the whole token budget.
  // 0: off (docs/ENGINE.md, "Latency-targeted chunking").
  double target_step_ms = 0;
  int32_t min_latency_chunk = 256;
  StepTimeModelOptions step_time_model;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  std::vector<int32_t> eos_token_ids;
  // Speculative decoding (the backend must support multi-position sampling): a decoding sequence without a
  // constraint proposes up to k tokens, verified in the same step; docs/ENGINE.md, "Speculative decoding".
  SpeculativeConfig speculation;
};

// What one step did to one sequence that produced a token.
struct SequenceUpdate {
  Sequence* seq = nullptr;
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
  FinishReason finish_reason = FinishReason::kNone;  // set when this token finished the sequence
  int32_t output_index = 0;  // the token's index in the sequence's output (a step may produce several)
};

struct SchedulerStats {
  uint64_t steps = 0;
  uint64_t scheduled_sequences = 0;  // summed over steps: mean batch size = scheduled_sequences / steps
  uint64_t preemptions = 0;
  uint64_t latency_limited_chunks = 0;  // prefill chunks cut by target_step_ms
  SpeculationStats speculation;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, BlockManager& blocks);

  const SchedulerOptions& options() const { return options_; }
  const SchedulerStats& stats() const { return stats_; }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  std::span<Sequence* const> running() const { return running_; }
  std::span<Sequence* const> waiting() const { return waiting_; }

  // Draft-model speculation: called once per step, after the step's sequences and their proposal slots are chosen and
  // before the batch is built, with the sequences that need proposals (engine.cpp passes the DraftModelProposer).
  void set_draft_proposer(std::function<void(std::span<const DraftRequest>)> proposer) {
    draft_proposer_ = std::move(proposer);
  }

  // Queues a new sequence (status waiting, no blocks).
  void add(Sequence* seq);

  // Picks the next batch. Empty (no sequences) when nothing can run.
  Batch& schedule();

  // Applies the backend's results (one per sampling sequence, one per position of a verified sequence, in batch
  // order) to the sequences of the last batch: advances num_computed, appends sampled tokens (a verified sequence's
  // accepted proposals and the token sampled after them), applies stop conditions. Finished sequences release their
  // blocks and leave the scheduler. Appends one update per produced token to `updates`.
  void postprocess(std::span<const SampleResult> results, std::vector<SequenceUpdate>& updates);

  // The wall time of the last batch's backend step, which calibrates the step time model (target_step_ms).
  void record_step_time(double seconds);
  const StepTimeModel& step_time_model() const { return step_time_; }

  // Sequences of the last batch, for failing them when the backend throws.
  std::vector<Sequence*> last_batch_sequences() const;

  // Ends a waiting or running sequence (abort, deadline, stop string, error): releases its blocks at once.
  void finish(Sequence* seq, FinishReason reason);

 private:
  struct Scheduled {
    Sequence* seq;
    int32_t num_new_tokens;  // including the proposals
    int32_t num_drafts = 0;  // proposed tokens verified after the sequence's last token
  };

  // Priority policy: preempts running sequences of strictly worse priority (by recompute) until the best waiting one
  // has a seat and blocks for its next chunk.
  void preempt_for_priority();
  // The step's prefill slots left under the partial-prefill limits.
  struct PrefillSlots {
    int32_t prefills = 0;       // sequences
    int32_t long_prefills = 0;  // long ones among them
  };
  PrefillSlots prefill_slots() const;
  // Tokens of a prefill with `remaining` prompt tokens left it may compute now (0: no slot), taking its slot.
  int32_t take_prefill_slot(int32_t remaining, PrefillSlots& slots) const;
  // `tokens` of a prefill after `cached` tokens, cut so the chunk costs no more than the one a fresh prompt would get
  // with `budget` tokens left in the step.
  int32_t cost_limited_chunk(int32_t tokens, int64_t cached, int32_t budget) const;
  // `tokens` of a prefill after `cached` tokens, cut to the step's latency budget left (target_step_ms). With
  // `guarantee_minimum` never below min_latency_chunk (or `tokens`); otherwise possibly 0: not this step.
  int32_t latency_limited_chunk(int32_t tokens, int64_t cached, bool guarantee_minimum);
  // A prefill chunk of `tokens` after `cached` joined the step: its cost counts against the latency budget.
  void charge_prefill(int32_t tokens, int64_t cached);
  bool schedule_running(Sequence* seq, int32_t& budget, bool& preempted, PrefillSlots& slots);
  // Fills seq.speculation.drafts for a decode with `budget` tokens left in the step; returns how many.
  int32_t propose_drafts(Sequence& seq, int32_t budget);
  // postprocess() of a verified sequence: `results` has one sample per position (num_drafts + 1).
  void accept_drafts(Sequence* seq, int32_t num_drafts, std::span<const SampleResult> results,
                     std::vector<SequenceUpdate>& updates);
  // Draft model: hands the scheduled decodes that take proposals (or a shadow proposal) to draft_proposer_.
  void request_draft_proposals();
  void admit_waiting(int32_t& budget, PrefillSlots& slots);
  std::vector<Sequence*> waiting_in_policy_order() const;
  bool fork_gate_open(const Sequence& seq) const;
  Sequence* pick_victim(const Sequence* requester) const;
  void preempt(Sequence* victim);
  void insert_waiting(Sequence* seq);
  void remove_from(std::vector<Sequence*>& queue, Sequence* seq);
  FinishReason stop_reason(const Sequence& seq, int32_t token) const;
  void build_batch();

  SchedulerOptions options_;
  BlockManager& blocks_;
  PrefillCost prefill_cost_;
  StepTimeModel step_time_;
  double latency_cost_left_ = 0;  // prefill cost the step may still take under target_step_ms (infinite: no limit)
  double step_prefill_cost_ = 0;  // of the step being built, then of the last batch
  bool step_has_decodes_ = false;
  std::vector<Sequence*> waiting_;  // fcfs/lpm: by id; priority: by (priority, id)
  std::vector<Sequence*> running_;  // admission order
  // Batch slots no running sequence holds (BatchSequence::slot), the lowest last: a running sequence takes one at
  // admission and gives it back when preempted or finished, so at most max_num_seqs are ever in use.
  std::vector<int32_t> free_slots_;
  std::vector<Scheduled> scheduled_;
  Batch batch_;
  SchedulerStats stats_;
  uint64_t step_counter_ = 0;
  bool speculate_this_step_ = false;
  std::function<void(std::span<const DraftRequest>)> draft_proposer_;
};

}  // namespace qinfer
