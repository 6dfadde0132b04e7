#include "backend/cuda/batch_plan.h"

#include <algorithm>
#include <vector>

namespace qinfer::cuda {

namespace {

// Distinct history tokens with their output counts, in first-seen order: copied from the caller's penalty list when it
// keeps one (the engine does), else walked from the history. entry_of maps a vocabulary id to its entry in
// plan.penalties while the row is built (-1: none); it is all -1 again on return, so a walk costs O(history), not
// O(vocabulary) per row (a hash map per row cost ~60-100 ns per history token, 2-4 ms per step at 64 x 640 tokens).
void append_penalties(const BatchSequence& s, int vocab, BatchPlan& plan, DeviceSamplingParams& params,
                      std::vector<int32_t>& entry_of) {
  params.penalty_begin = static_cast<int32_t>(plan.penalties.size());
  if (s.sampling->has_penalties() && s.penalty_tokens != nullptr) {
    for (const PenaltyTokenCount& e : s.penalty_tokens->entries())
      if (e.token >= 0 && e.token < vocab) plan.penalties.push_back({e.token, e.output_count});
  } else if (s.sampling->has_penalties()) {
    if (entry_of.empty()) entry_of.assign(static_cast<size_t>(vocab), -1);
    auto visit = [&](int32_t token, bool output) {
      if (token < 0 || token >= vocab) return;  // as the reference: ids outside the vocabulary are ignored
      int32_t& entry = entry_of[static_cast<size_t>(token)];
      if (entry < 0) {
        entry = static_cast<int32_t>(plan.penalties.size());
        plan.penalties.push_back({token, 0});
      }
      if (output) ++plan.penalties[static_cast<size_t>(entry)].output_count;
    };
    // Repetition penalty covers prompt and output; presence/frequency only the output.
    if (s.sampling->repetition_penalty != 1.0f)
      for (int32_t token : s.history.prompt) visit(token, false);
    for (int32_t token : s.history.output) visit(token, true);
    for (size_t e = static_cast<size_t>(params.penalty_begin); e < plan.penalties.size(); ++e)
      entry_of[static_cast<size_t>(plan.penalties[e].token)] = -1;
  }
  params.penalty_end = static_cast<int32_t>(plan.penalties.size());
}

}  // namespace

BatchPlan plan_batch(const Batch& batch, int block_size, int vocab) {
  BatchPlan plan;
  plan.num_tokens = static_cast<int>(batch.token_ids.size());
  plan.token_ids = batch.token_ids;
  plan.positions.reserve(batch.token_ids.size());
  plan.slots.reserve(batch.token_ids.size());

  for (const BatchSequence& s : batch.sequences) {
    const int blocks = (s.num_cached + s.num_tokens + block_size - 1) / block_size;
    plan.block_table_stride = std::max(plan.block_table_stride, blocks);
  }
  plan.block_tables.assign(batch.sequences.size() * static_cast<size_t>(plan.block_table_stride), 0);

  int token_row = 0;
  std::vector<int32_t> penalty_entry_of;  // sized to the vocabulary by the first row with penalties
  size_t history_tokens = 0;              // an upper bound of the entries: one allocation instead of regrowing
  for (const BatchSequence& s : batch.sequences)
    if (s.sample && s.sampling->has_penalties())
      history_tokens += s.penalty_tokens != nullptr ? s.penalty_tokens->entries().size()
                                                    : s.history.prompt.size() + s.history.output.size();
  plan.penalties.reserve(history_tokens);
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const BatchSequence& s = batch.sequences[i];
    const int row = static_cast<int>(i);
    const int context = s.num_cached + s.num_tokens;
    const int blocks = (context + block_size - 1) / block_size;
    std::copy_n(s.block_table.begin(), blocks,
                plan.block_tables.begin() + static_cast<ptrdiff_t>(i) * plan.block_table_stride);
    for (int t = 0; t < s.num_tokens; ++t) {
      const int position = s.num_cached + t;
      plan.positions.push_back(position);
      plan.slots.push_back(static_cast<int64_t>(s.block_table[position / block_size]) * block_size +
                           position % block_size);
    }
    if (s.num_tokens == 1) {
      plan.decode_table_rows.push_back(row);
      plan.decode_q_rows.push_back(token_row);
      plan.decode_context_lens.push_back(context);
      plan.max_decode_context = std::max(plan.max_decode_context, context);
    } else {
      plan.prefill_table_rows.push_back(row);
      plan.prefill_q_starts.push_back(token_row);
      plan.prefill_q_lens.push_back(s.num_tokens);
      plan.prefill_cached_lens.push_back(s.num_cached);
      plan.max_prefill_q_len = std::max(plan.max_prefill_q_len, s.num_tokens);
    }
    if (s.sample) {
      plan.sample_rows.push_back(token_row + s.num_tokens - 1);
      const SamplingParams& p = *s.sampling;
      DeviceSamplingParams d;
      d.temperature = p.temperature;
      d.top_k = p.top_k;
      d.top_p = p.top_p;
      d.min_p = p.min_p;
      d.repetition_penalty = p.repetition_penalty;
      d.presence_penalty = p.presence_penalty;
      d.frequency_penalty = p.frequency_penalty;
      d.num_top_logprobs = p.num_top_logprobs;
      d.seed = p.seed;
      d.step = s.sample_step;
      append_penalties(s, vocab, plan, d, penalty_entry_of);
      plan.sampling_params.push_back(d);
    }
    token_row += s.num_tokens;
  }
  return plan;
}

bool is_graphable_decode(const BatchPlan& plan) {
  return plan.prefill_q_lens.empty() && !plan.decode_q_rows.empty() &&
         plan.sample_rows.size() == plan.decode_q_rows.size();
}

void pad_decode_plan(BatchPlan& plan, int padded_sequences, int stride, int32_t scratch_block, int block_size) {
  const int sequences = static_cast<int>(plan.decode_q_rows.size());
  std::vector<int32_t> tables(static_cast<size_t>(padded_sequences) * stride, scratch_block);
  for (int s = 0; s < sequences; ++s)
    std::copy_n(plan.block_tables.begin() + static_cast<ptrdiff_t>(s) * plan.block_table_stride,
                plan.block_table_stride, tables.begin() + static_cast<ptrdiff_t>(s) * stride);
  plan.block_tables = std::move(tables);
  plan.block_table_stride = stride;
  DeviceSamplingParams greedy;
  greedy.temperature = 0;
  greedy.penalty_begin = greedy.penalty_end = static_cast<int32_t>(plan.penalties.size());
  for (int s = sequences; s < padded_sequences; ++s) {
    plan.token_ids.push_back(0);
    plan.positions.push_back(0);
    plan.slots.push_back(static_cast<int64_t>(scratch_block) * block_size);
    plan.decode_table_rows.push_back(s);
    plan.decode_q_rows.push_back(s);
    plan.decode_context_lens.push_back(1);
    plan.sample_rows.push_back(s);
    plan.sampling_params.push_back(greedy);
  }
  plan.num_tokens = padded_sequences;
}

}  // namespace qinfer::cuda
