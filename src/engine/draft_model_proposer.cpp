#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "engine/draft_verification.h"
#include "util/error.h"

namespace qinfer {

using Clock = std::chrono::steady_clock;

DraftStats DraftStats::since(const DraftStats& earlier) const {
  return {steps - earlier.steps, proposed_tokens - earlier.proposed_tokens, catch_up_tokens - earlier.catch_up_tokens,
          seconds - earlier.seconds};
}

DraftModelProposer::DraftModelProposer(Backend& draft, int32_t max_num_seqs, int32_t max_num_batched_tokens)
    : draft_(draft), max_num_seqs_(max_num_seqs), max_num_batched_tokens_(max_num_batched_tokens) {
  QINFER_CHECK(max_num_seqs_ > 0 && max_num_batched_tokens_ > 0);
}

void DraftModelProposer::propose(std::span<const DraftRequest> requests) {
  if (requests.empty()) return;
  const Clock::time_point start = Clock::now();
  std::vector<Pending> pending;
  pending.reserve(requests.size());  // entries are referenced by the batches built from them
  for (const DraftRequest& request : requests) {
    Sequence& seq = *request.seq;
    QINFER_CHECK(request.num_tokens > 0 &&
                 (request.shadow || seq.speculation.drafts.size() == static_cast<size_t>(request.num_tokens)));
    seq.speculation.draft_distributions.clear();
    Pending entry{&request,
                  seq.sampling,
                  {seq.output().begin(), seq.output().end()},
                  std::min(seq.speculation.draft_num_computed, seq.num_tokens() - 1),
                  0};
    entry.sampling.seed = draft_proposal_seed(seq.sampling.seed);
    entry.sampling.num_top_logprobs = 0;
    stats_.catch_up_tokens += static_cast<uint64_t>(seq.num_tokens() - entry.next_position);
    pending.push_back(std::move(entry));
  }
  while (run_step(pending)) ++stats_.steps;
  for (const DraftRequest& request : requests) {
    SpeculationState& spec = request.seq->speculation;
    // Fed: every known token and all proposals but the last.
    spec.draft_num_computed = request.seq->num_tokens() + request.num_tokens - 1;
    spec.shadow_pending = false;
    stats_.proposed_tokens += static_cast<uint64_t>(request.num_tokens);
  }
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

bool DraftModelProposer::run_step(std::vector<Pending>& pending) {
  Batch batch;
  std::vector<Pending*> members;
  std::vector<int32_t> ends;  // [members]: the position after the last token fed
  int32_t budget = max_num_batched_tokens_;
  bool host_sampling = false;
  for (Pending& entry : pending) {
    if (entry.produced == entry.request->num_tokens) continue;
    if (budget <= 0 || static_cast<int32_t>(members.size()) >= max_num_seqs_) break;
    const Sequence& seq = *entry.request->seq;
    const int32_t known = seq.num_tokens(), num_output = seq.num_output_tokens();
    // Known tokens go in as one chunk (cut by the budget); after them each proposal is fed alone, since the next
    // depends on it.
    const int32_t end =
        entry.next_position < known ? std::min(known, entry.next_position + budget) : entry.next_position + 1;
    for (int32_t pos = entry.next_position; pos < end; ++pos)
      batch.token_ids.push_back(pos < known ? seq.tokens[static_cast<size_t>(pos)]
                                            : entry.history[static_cast<size_t>(num_output + pos - known)]);
    BatchSequence item;
    item.num_tokens = end - entry.next_position;
    item.num_cached = entry.next_position;
    item.block_table = seq.block_table;
    item.slot = seq.slot;
    item.table_generation = seq.table_generation;
    item.sample = end >= known;
    item.sampling = &entry.sampling;
    item.history = {seq.prompt(),
                    std::span<const int32_t>(entry.history).first(static_cast<size_t>(num_output + entry.produced))};
    item.sample_step = static_cast<uint64_t>(num_output + entry.produced);
    if (item.sample) {
      item.logit_bias = seq.logit_bias;
      host_sampling = host_sampling || !entry.sampling.greedy();
    }
    budget -= item.num_tokens;
    batch.sequences.push_back(item);
    members.push_back(&entry);
    ends.push_back(end);
  }
  if (members.empty()) return false;

  std::vector<int32_t> sampled;  // one per sampling member, in order
  if (host_sampling) {
    // q itself is needed: the draft's logits come back and are sampled here as sample_token() would.
    std::vector<float> logits = draft_.forward_logits(batch);
    const size_t vocab = static_cast<size_t>(draft_.config().vocab_size);
    size_t row = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const BatchSequence& item = batch.sequences[i];
      if (!item.sample) continue;
      std::span<float> row_logits(logits.data() + row++ * vocab, vocab);
      apply_logit_constraints(row_logits, {}, item.logit_bias);
      SamplingDistribution q = sampling_distribution(row_logits, *item.sampling, item.history);
      const bool greedy = item.sampling->greedy();
      sampled.push_back(greedy ? q.ids.front() : draw_from(q, sampling_uniform(item.sampling->seed, item.sample_step)));
      if (!greedy && !members[i]->request->shadow)
        members[i]->request->seq->speculation.draft_distributions.push_back(std::move(q));
    }
  } else {
    for (const SampleResult& result : draft_.step(batch)) sampled.push_back(result.token);
  }

  size_t next_sample = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Pending& entry = *members[i];
    entry.next_position = ends[i];
    if (!batch.sequences[i].sample) continue;
    const int32_t token = sampled[next_sample++];
    SpeculationState& spec = entry.request->seq->speculation;
    if (entry.request->shadow)
      spec.shadow_token = token;
    else
      spec.drafts[static_cast<size_t>(entry.produced)] = token;
    entry.history.push_back(token);
    ++entry.produced;
  }
  return true;
}

}  // namespace qinfer
