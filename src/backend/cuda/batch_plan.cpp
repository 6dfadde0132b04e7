#include "backend/cuda/batch_plan.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace qinfer::cuda {

namespace {

static_assert(sizeof(LogitBias) == sizeof(DeviceLogitBias) &&
                  offsetof(LogitBias, token) == offsetof(DeviceLogitBias, token) &&
                  offsetof(LogitBias, bias) == offsetof(DeviceLogitBias, bias),
              "logit_bias entries are uploaded as DeviceLogitBias bytes");
static_assert(sizeof(PenaltyTokenCount) == sizeof(PenaltyEntry) &&
                  offsetof(PenaltyTokenCount, token) == offsetof(PenaltyEntry, token) &&
                  offsetof(PenaltyTokenCount, output_count) == offsetof(PenaltyEntry, output_count),
              "a caller's penalty list is uploaded as PenaltyEntry bytes");

// Where a row's penalty entries are: a caller's list (`caller`, count entries) or owned_penalties[owned_begin, +count).
struct PenaltyPart {
  const PenaltyTokenCount* caller = nullptr;
  size_t owned_begin = 0, count = 0;
};

// Distinct history tokens with their output counts, in first-seen order: the caller's penalty list when it keeps one
// (the engine does; copied into owned_penalties only when it holds ids outside the vocabulary), else walked from the
// history into owned_penalties. entry_of maps a vocabulary id to its entry in owned_penalties while the row is built
// (-1: none); it is all -1 again on return, so a walk costs O(history), not O(vocabulary) per row (a hash map per row
// cost ~60-100 ns per history token, 2-4 ms per step at 64 x 640 tokens).
// `history` is the sequence's history as the row sees it: with sample_all_positions cut to the row's position (such
// sequences carry no penalty list, validate_batch refuses one).
PenaltyPart penalty_part(const BatchSequence& s, const TokenHistory& history, int vocab, BatchPlan& plan,
                         std::vector<int32_t>& entry_of) {
  PenaltyPart part;
  part.owned_begin = plan.owned_penalties.size();
  if (!s.sampling->has_penalties()) return part;
  if (s.penalty_tokens != nullptr) {
    const std::span<const PenaltyTokenCount> entries = s.penalty_tokens->entries();
    if (s.penalty_tokens->within_vocabulary(vocab)) {
      part.caller = entries.data();
      part.count = entries.size();
      return part;
    }
    for (const PenaltyTokenCount& e : entries)
      if (e.token >= 0 && e.token < vocab) plan.owned_penalties.push_back({e.token, e.output_count});
  } else {
    if (entry_of.empty()) entry_of.assign(static_cast<size_t>(vocab), -1);
    auto visit = [&](int32_t token, bool output) {
      if (token < 0 || token >= vocab) return;  // as the reference: ids outside the vocabulary are ignored
      int32_t& entry = entry_of[static_cast<size_t>(token)];
      if (entry < 0) {
        entry = static_cast<int32_t>(plan.owned_penalties.size());
        plan.owned_penalties.push_back({token, 0});
      }
      if (output) ++plan.owned_penalties[static_cast<size_t>(entry)].output_count;
    };
    // Repetition penalty covers prompt and output; presence/frequency only the output.
    if (s.sampling->repetition_penalty != 1.0f)
      for (int32_t token : history.prompt) visit(token, false);
    for (int32_t token : history.output) visit(token, true);
    for (size_t e = part.owned_begin; e < plan.owned_penalties.size(); ++e)
      entry_of[static_cast<size_t>(plan.owned_penalties[e].token)] = -1;
  }
  part.count = plan.owned_penalties.size() - part.owned_begin;
  return part;
}

}  // namespace

BatchPlan plan_batch(const Batch& batch, int block_size, int vocab) {
  BatchPlan plan;
  plan.num_tokens = static_cast<int>(batch.token_ids.size());
  plan.token_ids = batch.token_ids;
  plan.positions.reserve(batch.token_ids.size());
  plan.slots.reserve(batch.token_ids.size());

  plan.tables.reserve(batch.sequences.size());
  int token_row = 0;
  std::vector<int32_t> penalty_entry_of;  // sized to the vocabulary by the first row with penalties
  std::vector<PenaltyPart> penalty_parts;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const BatchSequence& s = batch.sequences[i];
    const int row = static_cast<int>(i);
    const int context = s.num_cached + s.num_tokens;
    const int blocks = (context + block_size - 1) / block_size;
    plan.tables.push_back(s.block_table.first(static_cast<size_t>(blocks)));
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
    // One sampled row per sampled position: the last, or every one with sample_all_positions. Position i of
    // num_samples draws with sample_step + i and sees the output up to the proposals before it (backend.h).
    const int32_t num_samples = s.num_samples();
    const size_t base_output = s.history.output.size() - static_cast<size_t>(std::max(0, num_samples - 1));
    for (int32_t i = 0; i < num_samples; ++i) {
      plan.sample_rows.push_back(token_row + s.num_tokens - num_samples + i);
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
      d.step = s.sample_step + static_cast<uint64_t>(i);
      const TokenHistory history{s.history.prompt, s.history.output.first(base_output + static_cast<size_t>(i))};
      const PenaltyPart part = penalty_part(s, history, vocab, plan, penalty_entry_of);
      d.penalty_begin = plan.num_penalties;
      d.penalty_end = plan.num_penalties += static_cast<int32_t>(part.count);
      if (part.count > 0) penalty_parts.push_back(part);
      if (!s.allowed_tokens.empty()) {
        d.mask_index = static_cast<int32_t>(plan.masks.size());
        plan.masks.push_back(s.allowed_tokens);
      }
      d.bias_begin = plan.num_biases;
      d.bias_end = plan.num_biases += static_cast<int32_t>(s.logit_bias.size());
      if (!s.logit_bias.empty()) plan.biases.push_back(s.logit_bias);
      plan.sampling_params.push_back(d);
    }
    token_row += s.num_tokens;
  }
  // owned_penalties is complete: its runs can be viewed now.
  for (const PenaltyPart& part : penalty_parts) {
    const std::byte* first = part.caller != nullptr
                                 ? reinterpret_cast<const std::byte*>(part.caller)
                                 : reinterpret_cast<const std::byte*>(plan.owned_penalties.data() + part.owned_begin);
    plan.penalty_parts.emplace_back(first, part.count * sizeof(PenaltyEntry));
  }
  return plan;
}

std::vector<PenaltyEntry> penalty_entries(const BatchPlan& plan) {
  std::vector<PenaltyEntry> entries(static_cast<size_t>(plan.num_penalties));
  std::byte* out = reinterpret_cast<std::byte*>(entries.data());
  for (const std::span<const std::byte> part : plan.penalty_parts) out = std::copy(part.begin(), part.end(), out);
  return entries;
}

bool is_graphable_decode(const BatchPlan& plan) {
  return plan.prefill_q_lens.empty() && !plan.decode_q_rows.empty() &&
         plan.sample_rows.size() == plan.decode_q_rows.size();
}

GraphableChunks graphable_chunks(const BatchPlan& plan) {
  const size_t sequences = plan.prefill_q_lens.size();
  if (!plan.decode_q_rows.empty() || sequences == 0) return {};
  const int32_t positions = plan.prefill_q_lens.front();
  const bool uniform = std::all_of(plan.prefill_q_lens.begin(), plan.prefill_q_lens.end(),
                                   [&](int32_t q_len) { return q_len == positions; });
  if (!uniform || positions < 2) return {};
  if (plan.sample_rows.size() == static_cast<size_t>(plan.num_tokens)) return {positions, true};
  // Each sequence samples its last row only: rows are in sequence order, one per sequence.
  if (positions > kMaxGraphedLastRowChunk || plan.sample_rows.size() != sequences) return {};
  for (size_t s = 0; s < sequences; ++s)
    if (plan.sample_rows[s] != plan.prefill_q_starts[s] + positions - 1) return {};
  return {positions, false};
}

namespace {

// A padding row's sampling: greedy, no penalties.
DeviceSamplingParams padding_sampling(const BatchPlan& plan) {
  DeviceSamplingParams greedy;
  greedy.temperature = 0;
  greedy.penalty_begin = greedy.penalty_end = plan.num_penalties;
  return greedy;
}

}  // namespace

void pad_decode_plan(BatchPlan& plan, int padded_sequences, int32_t scratch_block, int block_size) {
  const int sequences = static_cast<int>(plan.decode_q_rows.size());
  const DeviceSamplingParams greedy = padding_sampling(plan);
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

void pad_chunk_plan(BatchPlan& plan, int padded_sequences, int32_t scratch_block, int block_size, bool all_sampled) {
  const int sequences = static_cast<int>(plan.prefill_q_lens.size());
  const int positions = plan.max_prefill_q_len;
  const DeviceSamplingParams greedy = padding_sampling(plan);
  for (int s = sequences; s < padded_sequences; ++s) {
    const int first_row = s * positions;
    for (int t = 0; t < positions; ++t) {
      plan.token_ids.push_back(0);
      plan.positions.push_back(t);
      // Positions beyond the scratch block wrap into it: the dummy rows' K/V are never read by a real sequence.
      plan.slots.push_back(static_cast<int64_t>(scratch_block) * block_size + t % block_size);
      if (all_sampled || t == positions - 1) {
        plan.sample_rows.push_back(first_row + t);
        plan.sampling_params.push_back(greedy);
      }
    }
    plan.prefill_table_rows.push_back(s);
    plan.prefill_q_starts.push_back(first_row);
    plan.prefill_q_lens.push_back(positions);
    plan.prefill_cached_lens.push_back(0);
  }
  plan.num_tokens = padded_sequences * positions;
}

}  // namespace qinfer::cuda
