#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "engine/ngram_proposer.h"
#include "util/error.h"

namespace qinfer {

SchedulingPolicy parse_scheduling_policy(const std::string& name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  if (name == "lpm") return SchedulingPolicy::kLpm;
  throw Error(ErrorKind::kInvalidArgument, "--scheduling-policy must be fcfs, priority or lpm, got '" + name + "'");
}

const char* scheduling_policy_name(SchedulingPolicy policy) {
  switch (policy) {
    case SchedulingPolicy::kFcfs:
      return "fcfs";
    case SchedulingPolicy::kPriority:
      return "priority";
    case SchedulingPolicy::kLpm:
      return "lpm";
  }
  return "?";
}

Scheduler::Scheduler(SchedulerOptions options, BlockManager& blocks)
    : options_(std::move(options)),
      blocks_(blocks),
      prefill_cost_(options_.prefill_attention_cost_ratio),
      step_time_(options_.step_time_model) {
  if (options_.max_num_seqs <= 0 || options_.max_num_batched_tokens <= 0 || options_.max_model_len <= 0)
    throw Error(ErrorKind::kInvalidArgument, "scheduler limits must be positive: max_num_seqs " +
                                                 std::to_string(options_.max_num_seqs) + ", max_num_batched_tokens " +
                                                 std::to_string(options_.max_num_batched_tokens) + ", max_model_len " +
                                                 std::to_string(options_.max_model_len));
  const int32_t partial = options_.max_num_partial_prefills, long_partial = options_.max_long_partial_prefills;
  if (options_.long_prefill_token_threshold < 0 || partial < 0 || long_partial < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "partial-prefill limits must not be negative: long_prefill_token_threshold " +
                    std::to_string(options_.long_prefill_token_threshold) + ", max_num_partial_prefills " +
                    std::to_string(partial) + ", max_long_partial_prefills " + std::to_string(long_partial));
  if (partial > 0 && long_partial > partial)
    throw Error(ErrorKind::kInvalidArgument, "max_long_partial_prefills (" + std::to_string(long_partial) +
                                                 ") must not exceed max_num_partial_prefills (" +
                                                 std::to_string(partial) + ")");
  const SpeculativeConfig& spec = options_.speculation;
  if (spec.enabled() &&
      (spec.num_speculative_tokens < 1 || spec.num_speculative_tokens > kMaxSpeculativeTokens ||
       spec.prompt_lookup_min < 1 || spec.prompt_lookup_max < spec.prompt_lookup_min || spec.disable_by_batch_size < 0))
    throw Error(ErrorKind::kInvalidArgument,
                "speculative decoding needs num_speculative_tokens in [1, " + std::to_string(kMaxSpeculativeTokens) +
                    "] and 1 <= prompt_lookup_min <= prompt_lookup_max, got " +
                    std::to_string(spec.num_speculative_tokens) + ", " + std::to_string(spec.prompt_lookup_min) + ", " +
                    std::to_string(spec.prompt_lookup_max));
  if (!(options_.target_step_ms >= 0) || !std::isfinite(options_.target_step_ms) || options_.min_latency_chunk < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "target_step_ms must be a finite number >= 0 and min_latency_chunk >= 1, got " +
                    std::to_string(options_.target_step_ms) + " and " + std::to_string(options_.min_latency_chunk));
  if (!(options_.prefill_attention_cost_ratio >= 0) || !std::isfinite(options_.prefill_attention_cost_ratio))
    throw Error(ErrorKind::kInvalidArgument, "prefill_attention_cost_ratio must be a finite number >= 0, got " +
                                                 std::to_string(options_.prefill_attention_cost_ratio));
  for (int32_t slot = options_.max_num_seqs - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

void Scheduler::add(Sequence* seq) {
  QINFER_CHECK(seq->status == SequenceStatus::kWaiting && seq->block_table.empty());
  seq->speculation.k = options_.speculation.enabled() ? options_.speculation.num_speculative_tokens : 0;
  insert_waiting(seq);
}

Batch& Scheduler::schedule() {
  ++step_counter_;
  scheduled_.clear();
  preempt_for_priority();
  int32_t budget = options_.max_num_batched_tokens;
  PrefillSlots slots = prefill_slots();
  bool preempted = false;
  // Snapshot: preemption removes entries from running_ while we walk it.
  std::vector<Sequence*> running = running_;
  auto remaining = [](const Sequence* seq) { return seq->num_tokens() - seq->num_computed; };
  const SpeculativeConfig& spec = options_.speculation;
  if (spec.enabled()) {
    const auto decodes =
        std::count_if(running.begin(), running.end(), [&](const Sequence* seq) { return remaining(seq) == 1; });
    speculate_this_step_ = spec.disable_by_batch_size == 0 || decodes <= spec.disable_by_batch_size;
  }
  for (Sequence* seq : running)
    if (seq->status == SequenceStatus::kRunning && remaining(seq) == 1) schedule_running(seq, budget, preempted, slots);
  // Everything scheduled so far decodes; the prompt chunks that follow share what the target leaves beside them.
  step_has_decodes_ = !scheduled_.empty();
  step_prefill_cost_ = 0;
  latency_cost_left_ = options_.target_step_ms > 0 && step_has_decodes_
                           ? step_time_.prefill_budget(options_.target_step_ms)
                           : std::numeric_limits<double>::infinity();
  // Under the latency target the prompts with the fewest tokens left go first, so a chat that arrived beside a
  // document gets its first token in a step or two instead of sharing the minimum chunk for the whole document.
  if (!std::isinf(latency_cost_left_))
    std::stable_sort(running.begin(), running.end(),
                     [&](const Sequence* a, const Sequence* b) { return remaining(a) < remaining(b); });
  for (Sequence* seq : running)
    if (seq->status == SequenceStatus::kRunning && seq->scheduled_in_step != step_counter_ && remaining(seq) > 1)
      schedule_running(seq, budget, preempted, slots);
  // Admitting new work right after preempting would only thrash the cache.
  if (!preempted) admit_waiting(budget, slots);
  if (draft_proposer_) request_draft_proposals();
  build_batch();
  return batch_;
}

void Scheduler::preempt_for_priority() {
  if (options_.policy != SchedulingPolicy::kPriority || waiting_.empty()) return;
  Sequence* head = waiting_.front();  // the best waiting priority
  if (!fork_gate_open(*head)) return;
  blocks_.update_block_hashes(*head);
  auto fits = [&] {
    if (num_running() >= options_.max_num_seqs) return false;
    const PrefixMatch match = blocks_.match_prefix(*head);
    const int32_t num_new =
        std::min(head->num_tokens() - match.num_tokens(blocks_.block_size()), options_.max_num_batched_tokens);
    return blocks_.can_allocate(*head, match, num_new);
  };
  while (!fits()) {
    Sequence* victim = nullptr;  // the worst running priority, the latest among equals
    for (Sequence* seq : running_)
      if (victim == nullptr || std::make_tuple(seq->priority, seq->id) > std::make_tuple(victim->priority, victim->id))
        victim = seq;
    if (victim == nullptr || victim->priority <= head->priority) return;
    preempt(victim);
  }
}

Scheduler::PrefillSlots Scheduler::prefill_slots() const {
  constexpr int32_t kUnlimited = std::numeric_limits<int32_t>::max();
  const int32_t prefills = options_.max_num_partial_prefills > 0 ? options_.max_num_partial_prefills : kUnlimited;
  return {prefills, options_.max_long_partial_prefills > 0 ? options_.max_long_partial_prefills : prefills};
}

int32_t Scheduler::take_prefill_slot(int32_t remaining, PrefillSlots& slots) const {
  if (!options_.enable_chunked_prefill) return remaining;  // whole prompts: the budget alone decides
  const int32_t threshold = options_.long_prefill_token_threshold;
  const bool is_long = threshold > 0 && remaining > threshold;
  if (slots.prefills <= 0 || (is_long && slots.long_prefills <= 0)) return 0;
  --slots.prefills;
  if (is_long) --slots.long_prefills;
  return is_long ? threshold : remaining;
}

int32_t Scheduler::cost_limited_chunk(int32_t tokens, int64_t cached, int32_t budget) const {
  if (!options_.enable_chunked_prefill || tokens <= 1) return tokens;
  const int32_t threshold = options_.long_prefill_token_threshold;
  const int32_t fresh = std::min(threshold > 0 ? threshold : options_.max_num_batched_tokens, budget);
  return std::min(tokens, prefill_cost_.equal_cost_chunk(fresh, cached));
}

int32_t Scheduler::latency_limited_chunk(int32_t tokens, int64_t cached, bool guarantee_minimum) {
  if (!options_.enable_chunked_prefill || std::isinf(latency_cost_left_)) return tokens;
  const int32_t within = prefill_cost_.tokens_within(latency_cost_left_, cached, tokens);
  const int32_t chunk = guarantee_minimum ? std::max(within, std::min(tokens, options_.min_latency_chunk)) : within;
  if (chunk < tokens) ++stats_.latency_limited_chunks;
  return chunk;
}

void Scheduler::charge_prefill(int32_t tokens, int64_t cached) {
  const double cost = prefill_cost_.cost(tokens, cached);
  step_prefill_cost_ += cost;
  latency_cost_left_ -= cost;
}

void Scheduler::record_step_time(double seconds) {
  step_time_.observe(step_prefill_cost_, step_has_decodes_, seconds * 1000);
}

bool Scheduler::schedule_running(Sequence* seq, int32_t& budget, bool& preempted, PrefillSlots& slots) {
  int32_t num_new = seq->num_tokens() - seq->num_computed;
  if (budget <= 0 || (!options_.enable_chunked_prefill && num_new > budget)) return false;
  // A decode (one token left) needs no prefill slot; a token after a prompt's last chunk is a decode too.
  const PrefillSlots slots_before = slots;
  if (num_new > 1 && (num_new = take_prefill_slot(num_new, slots)) == 0) return false;
  num_new = cost_limited_chunk(std::min(num_new, budget), seq->num_computed, budget);
  const bool is_prefill = seq->num_tokens() - seq->num_computed > 1;
  // The step's first prompt chunk always makes progress; a later one (a longer prompt: they go shortest first) takes
  // only what the target leaves, so the minimum of a chunk deep in a long context is not paid on top of another.
  if (is_prefill && (num_new = latency_limited_chunk(num_new, seq->num_computed, step_prefill_cost_ == 0)) == 0) {
    slots = slots_before;
    return false;
  }
  // Only a sequence's last token can be followed by proposals (a one-token prefill chunk cannot).
  int32_t num_drafts = seq->num_tokens() - seq->num_computed == 1 ? propose_drafts(*seq, budget) : 0;
  while (!blocks_.can_append_slots(*seq, num_new)) {
    Sequence* victim = pick_victim(seq);
    preempt(victim);
    preempted = true;
    if (victim == seq) return false;
  }
  // Proposals never preempt anyone: without free blocks for them the sequence decodes one token.
  if (num_drafts > 0 && !blocks_.can_append_slots(*seq, num_new + num_drafts)) num_drafts = 0;
  seq->speculation.drafts.resize(static_cast<size_t>(num_drafts));
  num_new += num_drafts;
  blocks_.append_slots(*seq, num_new);
  if (is_prefill) charge_prefill(num_new, seq->num_computed);
  seq->scheduled_in_step = step_counter_;
  scheduled_.push_back({seq, num_new, num_drafts});
  budget -= num_new;
  return true;
}

int32_t Scheduler::propose_drafts(Sequence& seq, int32_t budget) {
  SpeculationState& spec = seq.speculation;
  spec.drafts.clear();
  spec.shadow_token = -1;
  spec.shadow_pending = false;
  const SpeculativeConfig& config = options_.speculation;
  // Per-position masks of constrained decoding would need the grammar advanced through every proposal.
  if (!config.enabled() || !speculate_this_step_ || seq.matcher) return 0;
  // Proposals past max_tokens or the context could never be kept.
  const int32_t room =
      std::min({seq.max_tokens - seq.num_output_tokens(), options_.max_model_len - seq.num_tokens(), budget}) - 1;
  if (config.method == SpeculativeMethod::kDraftModel) {  // the draft fills them in request_draft_proposals()
    spec.shadow_pending = spec.k == 0 && seq.num_output_tokens() % kDraftShadowInterval == 0;
    return std::max(0, std::min(spec.k, room));
  }
  if (spec.k == 0) {
    spec.ngram_index.propose(seq.tokens, config.prompt_lookup_min, config.prompt_lookup_max, 1, spec.drafts);
    if (!spec.drafts.empty()) spec.shadow_token = spec.drafts.front();
    spec.drafts.clear();
    return 0;
  }
  const int32_t limit = std::min(spec.k, room);
  if (limit <= 0) return 0;
  spec.ngram_index.propose(seq.tokens, config.prompt_lookup_min, config.prompt_lookup_max, limit, spec.drafts);
  return static_cast<int32_t>(spec.drafts.size());
}

void Scheduler::request_draft_proposals() {
  std::vector<DraftRequest> requests;
  for (const Scheduled& item : scheduled_) {
    Sequence& seq = *item.seq;
    // Only decodes: their block tables cover every position the draft writes (the last token and the proposals).
    const bool decode = item.num_new_tokens - item.num_drafts == 1 && seq.num_tokens() - seq.num_computed == 1;
    if (item.num_drafts > 0)
      requests.push_back({&seq, item.num_drafts, false});
    else if (decode && seq.speculation.shadow_pending)
      requests.push_back({&seq, 1, true});
  }
  if (!requests.empty()) draft_proposer_(requests);
}

Sequence* Scheduler::pick_victim(const Sequence* requester) const {
  // The lowest-ranked running sequence not yet scheduled in this step; the requester itself when it ranks lowest.
  auto rank = [&](const Sequence* seq) {
    int32_t priority = options_.policy == SchedulingPolicy::kPriority ? seq->priority : 0;
    return std::make_tuple(priority, seq->id);
  };
  Sequence* victim = const_cast<Sequence*>(requester);
  for (Sequence* seq : running_)
    if (seq->scheduled_in_step != step_counter_ && rank(seq) > rank(victim)) victim = seq;
  return victim;
}

void Scheduler::preempt(Sequence* victim) {
  blocks_.free(*victim);
  remove_from(running_, victim);
  free_slots_.push_back(std::exchange(victim->slot, BatchSequence::kNoSlot));
  victim->status = SequenceStatus::kWaiting;
  ++victim->num_preemptions;
  ++stats_.preemptions;
  insert_waiting(victim);
}

bool Scheduler::fork_gate_open(const Sequence& seq) const {
  if (seq.fork_parent == nullptr || seq.admitted_before) return true;
  return seq.fork_parent->finished() || seq.fork_parent->num_output_tokens() > 0;
}

std::vector<Sequence*> Scheduler::waiting_in_policy_order() const {
  std::vector<Sequence*> order = waiting_;
  if (options_.policy != SchedulingPolicy::kLpm) return order;
  std::vector<std::pair<size_t, Sequence*>> keyed;
  keyed.reserve(order.size());
  for (Sequence* seq : order) {
    blocks_.update_block_hashes(*seq);
    keyed.emplace_back(blocks_.match_prefix(*seq).blocks.size(), seq);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

void Scheduler::admit_waiting(int32_t& budget, PrefillSlots& slots) {
  if (waiting_.empty()) return;
  bool admitted_any = false;
  // Hashes of the full blocks this step computes for sequences admitted so far. A request whose next block to compute
  // is among them waits one step and then maps that block from the prefix cache instead of computing it again (two
  // chats with one system prompt arriving together).
  std::unordered_set<uint64_t> blocks_computed_this_step;
  const int32_t block_size = blocks_.block_size();
  for (Sequence* seq : waiting_in_policy_order()) {
    if (num_running() >= options_.max_num_seqs || budget <= 0) break;
    if (!fork_gate_open(*seq)) continue;
    blocks_.update_block_hashes(*seq);
    const Sequence* parent = seq->fork_parent;
    bool can_fork = parent != nullptr && parent->status == SequenceStatus::kRunning &&
                    parent->num_computed >= parent->num_prompt_tokens;
    PrefixMatch match = can_fork ? blocks_.match_fork(*parent, *seq) : blocks_.match_prefix(*seq);
    const size_t first_new_block = match.blocks.size();
    if (!can_fork && blocks_.prefix_caching() && first_new_block < seq->block_hashes.size() &&
        blocks_computed_this_step.contains(seq->block_hashes[first_new_block]))
      continue;
    int32_t num_new = seq->num_tokens() - match.num_tokens(block_size);
    if (!options_.enable_chunked_prefill && num_new > budget) break;
    // A long prompt without a long slot waits; a shorter one behind it may still take a slot.
    PrefillSlots slots_after = slots;
    const int32_t allowed = num_new > 1 ? take_prefill_slot(num_new, slots_after) : num_new;
    if (allowed == 0) {
      if (slots.prefills <= 0) break;
      continue;
    }
    num_new = cost_limited_chunk(std::min(allowed, budget), match.num_tokens(block_size), budget);
    // A waiting prompt always gets its minimum, or one arriving beside a long prompt that takes every step's budget
    // would never be admitted.
    num_new = latency_limited_chunk(num_new, match.num_tokens(block_size), true);
    if (!blocks_.can_allocate(*seq, match, num_new)) break;
    slots = slots_after;
    blocks_.allocate(*seq, match, num_new);
    charge_prefill(num_new, match.num_tokens(block_size));
    if (!seq->admitted_before) {
      seq->num_cached_prompt_tokens = std::min(seq->num_computed, seq->num_prompt_tokens);
      seq->admitted_before = true;
    }
    seq->status = SequenceStatus::kRunning;
    seq->scheduled_in_step = step_counter_;
    QINFER_CHECK(!free_slots_.empty(), "more running sequences than max_num_seqs");
    seq->slot = free_slots_.back();
    free_slots_.pop_back();
    running_.push_back(seq);
    scheduled_.push_back({seq, num_new});
    const size_t computed_full_blocks = static_cast<size_t>((seq->num_computed + num_new) / block_size);
    for (size_t b = first_new_block; b < std::min(computed_full_blocks, seq->block_hashes.size()); ++b)
      blocks_computed_this_step.insert(seq->block_hashes[b]);
    budget -= num_new;
    admitted_any = true;
  }
  if (admitted_any)
    std::erase_if(waiting_, [](const Sequence* seq) { return seq->status != SequenceStatus::kWaiting; });
}

void Scheduler::build_batch() {
  batch_.token_ids.clear();
  batch_.sequences.clear();
  for (const Scheduled& item : scheduled_) {
    const Sequence& seq = *item.seq;
    BatchSequence entry;
    entry.num_tokens = item.num_new_tokens;
    entry.num_cached = seq.num_computed;
    entry.block_table = seq.block_table;
    entry.slot = seq.slot;
    entry.table_generation = seq.table_generation;
    const int32_t num_known = item.num_new_tokens - item.num_drafts;  // of the sequence's own tokens
    entry.sample = seq.num_computed + num_known == seq.num_tokens();
    entry.sampling = &seq.sampling;
    entry.history = TokenHistory{seq.prompt(), seq.output()};
    entry.penalty_tokens = &seq.penalty_tokens;
    entry.sample_step = static_cast<uint64_t>(seq.num_output_tokens());
    if (entry.sample) {
      if (seq.matcher) entry.allowed_tokens = seq.allowed_tokens;
      entry.logit_bias = seq.logit_bias;
    }
    auto first = seq.tokens.begin() + seq.num_computed;
    batch_.token_ids.insert(batch_.token_ids.end(), first, first + num_known);
    if (item.num_drafts > 0) {
      SpeculationState& spec = item.seq->speculation;
      spec.verify_output.assign(seq.output().begin(), seq.output().end());
      spec.verify_output.insert(spec.verify_output.end(), spec.drafts.begin(), spec.drafts.end());
      entry.sample_all_positions = true;
      entry.history = TokenHistory{seq.prompt(), spec.verify_output};
      entry.penalty_tokens = nullptr;
      batch_.token_ids.insert(batch_.token_ids.end(), spec.drafts.begin(), spec.drafts.end());
    }
    batch_.sequences.push_back(entry);
  }
  if (!scheduled_.empty()) {
    ++stats_.steps;
    stats_.scheduled_sequences += scheduled_.size();
  }
}

std::vector<Sequence*> Scheduler::last_batch_sequences() const {
  std::vector<Sequence*> sequences;
  for (const Scheduled& item : scheduled_) sequences.push_back(item.seq);
  return sequences;
}

void Scheduler::postprocess(std::span<const SampleResult> results, std::vector<SequenceUpdate>& updates) {
  auto samples = [](const Scheduled& item) -> size_t {
    const bool sample = item.seq->num_computed + item.num_new_tokens - item.num_drafts == item.seq->num_tokens();
    return sample ? static_cast<size_t>(item.num_drafts) + 1 : 0;
  };
  size_t num_samples = 0;
  for (const Scheduled& item : scheduled_) num_samples += samples(item);
  if (num_samples != results.size())
    throw Error(ErrorKind::kInternal, "backend returned " + std::to_string(results.size()) + " results for " +
                                          std::to_string(num_samples) + " sampled positions");
  size_t next_result = 0;
  for (const Scheduled& item : scheduled_) {
    Sequence* seq = item.seq;
    if (item.num_drafts > 0) {
      const size_t count = samples(item);  // before accept_drafts() advances the sequence
      accept_drafts(seq, item.num_drafts, results.subspan(next_result, count), updates);
      next_result += count;
      continue;
    }
    seq->num_computed += item.num_new_tokens;
    blocks_.register_computed_blocks(*seq);
    if (seq->num_computed != seq->num_tokens()) continue;
    const SampleResult& result = results[next_result++];
    seq->tokens.push_back(result.token);
    seq->penalty_tokens.add_output(result.token);
    seq->speculation.adapt_after_shadow(result.token);
    SequenceUpdate update{
        seq, result.token, result.logprob, result.top, stop_reason(*seq, result.token), seq->num_output_tokens() - 1};
    if (update.finish_reason != FinishReason::kNone) finish(seq, update.finish_reason);
    updates.push_back(std::move(update));
  }
  scheduled_.clear();
}

void Scheduler::accept_drafts(Sequence* seq, int32_t num_drafts, std::span<const SampleResult> results,
                              std::vector<SequenceUpdate>& updates) {
  SpeculationState& spec = seq->speculation;
  // Position i was sampled as if the proposals before it were the output; the leading proposals that equal their
  // position's sample are the tokens decoding one by one would have produced, and the first sample that differs (or
  // the one after the last proposal) comes with them.
  int32_t accepted = 0;
  while (accepted < num_drafts &&
         results[static_cast<size_t>(accepted)].token == spec.drafts[static_cast<size_t>(accepted)])
    ++accepted;
  int32_t produced = 0;
  FinishReason reason = FinishReason::kNone;
  while (produced <= accepted && reason == FinishReason::kNone) {
    const SampleResult& result = results[static_cast<size_t>(produced++)];
    seq->tokens.push_back(result.token);
    seq->penalty_tokens.add_output(result.token);
    reason = stop_reason(*seq, result.token);
    updates.push_back({seq, result.token, result.logprob, result.top, reason, seq->num_output_tokens() - 1});
  }
  // K/V are valid for the sequence's last token and the proposals kept; the rest of the slots are dropped.
  seq->num_computed += produced;
  // The draft's K/V stay valid up to the first position fed with a proposal that was not kept.
  spec.draft_num_computed = std::min(spec.draft_num_computed, seq->num_computed);
  if (options_.speculation.method == SpeculativeMethod::kDraftModel) blocks_.mark_draft_computed(*seq);
  blocks_.release_surplus_slots(*seq);
  blocks_.register_computed_blocks(*seq);
  const int32_t kept = std::min(accepted, produced);
  stats_.speculation.record(num_drafts, kept);
  if (options_.speculation.adaptive)
    spec.adapt_after_verify(num_drafts, accepted, options_.speculation.num_speculative_tokens);
  if (reason != FinishReason::kNone) finish(seq, reason);
}

FinishReason Scheduler::stop_reason(const Sequence& seq, int32_t token) const {
  auto contains = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  if (contains(seq.stop_token_ids, token)) return FinishReason::kStop;
  if (!seq.ignore_eos && contains(options_.eos_token_ids, token)) return FinishReason::kStop;
  if (seq.num_output_tokens() >= seq.max_tokens || seq.num_tokens() >= options_.max_model_len)
    return FinishReason::kLength;
  return FinishReason::kNone;
}

void Scheduler::finish(Sequence* seq, FinishReason reason) {
  if (seq->finished()) return;
  if (seq->status == SequenceStatus::kRunning) {
    blocks_.free(*seq);
    remove_from(running_, seq);
    free_slots_.push_back(std::exchange(seq->slot, BatchSequence::kNoSlot));
  } else {
    remove_from(waiting_, seq);
  }
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
}

void Scheduler::insert_waiting(Sequence* seq) {
  auto before = [&](const Sequence* a, const Sequence* b) {
    if (options_.policy == SchedulingPolicy::kPriority && a->priority != b->priority) return a->priority < b->priority;
    return a->id < b->id;
  };
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, before), seq);
}

void Scheduler::remove_from(std::vector<Sequence*>& queue, Sequence* seq) {
  auto it = std::find(queue.begin(), queue.end(), seq);
  QINFER_CHECK(it != queue.end(), "sequence not in the queue it should be in");
  queue.erase(it);
}

}  // namespace qinfer
