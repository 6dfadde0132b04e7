// Host-side planning of one batch: the per-token and per-sequence metadata the kernels read, built on the host and
// copied to the device in one transfer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels/sampling.h"

namespace qinfer::cuda {

struct BatchPlan {
  BatchPlan() = default;
  BatchPlan(BatchPlan&&) = default;
  BatchPlan& operator=(BatchPlan&&) = default;
  BatchPlan(const BatchPlan&) = delete;  // a copy's penalty_parts would view the original's owned_penalties
  BatchPlan& operator=(const BatchPlan&) = delete;

  int num_tokens = 0;
  std::vector<int32_t> token_ids;  // [num_tokens]
  std::vector<int32_t> positions;  // [num_tokens]
  std::vector<int64_t> slots;      // [num_tokens] KV slot: block * block_size + offset

  // [num_sequences] each sequence's block ids covering its context, views of the batch. The kernels read the
  // device's tables instead (block_table_slots.h), which receive only what changed.
  std::vector<std::span<const int32_t>> tables;

  // Sequences with one new token use the decode attention kernel, the others the prefill kernel. The table rows are
  // batch rows here (graph padding rows past the batch's sequences); the step planner maps them to the rows of the
  // device's tables.
  std::vector<int32_t> decode_table_rows, decode_q_rows, decode_context_lens;  // [num_decode]
  int max_decode_context = 0;
  std::vector<int32_t> prefill_table_rows, prefill_q_starts, prefill_q_lens, prefill_cached_lens;  // [num_prefill]
  int max_prefill_q_len = 0;

  // [num_sampled] token row whose hidden state is sampled, in batch order: the last row of each sampling sequence,
  // every row of a sample_all_positions one. Each has its own params (its Philox step and penalty entries).
  std::vector<int32_t> sample_rows;
  std::vector<DeviceSamplingParams> sampling_params;  // [num_sampled]

  // The penalty entries that sampling_params' penalty_begin / penalty_end index: the concatenation of penalty_parts,
  // num_penalties PenaltyEntry in all. A part is a caller's penalty list as it is (PenaltyTokens' entries have
  // PenaltyEntry's layout), or a run of owned_penalties (a list walked from the history, or a caller's list with ids
  // outside the vocabulary dropped), so that the engine's lists go into the upload in one copy each.
  std::vector<std::span<const std::byte>> penalty_parts;
  std::vector<PenaltyEntry> owned_penalties;
  int32_t num_penalties = 0;

  // Constraints: views of the batch's allowed-token masks (mask_index order) and logit_bias lists (bias_begin order),
  // read only after the batch's prepare_constraints() (sampling_constraints.h uploads them then).
  std::vector<std::span<const uint32_t>> masks;
  std::vector<std::span<const LogitBias>> biases;
  int32_t num_biases = 0;
  bool constrained() const { return !masks.empty() || num_biases > 0; }
};

// Builds the plan of a validated batch. The plan's penalty_parts view the batch's penalty lists: it is valid while
// the batch is.
BatchPlan plan_batch(const Batch& batch, int block_size, int vocab);

// The concatenated penalty entries of a plan (what the upload sends), for checks.
std::vector<PenaltyEntry> penalty_entries(const BatchPlan& plan);

// Whether a plan can run as a captured decode graph: decode only, every sequence sampled.
bool is_graphable_decode(const BatchPlan& plan);

// The shape of a plan that can run as a captured graph of equal chunks: no decodes, every sequence computing the same
// number of positions (at least 2), with every position sampled (speculative verification: k + 1 positions) or only
// each sequence's last (a draft model catching up on the tokens accepted since it last ran, then proposing; at most
// kMaxGraphedLastRowChunk positions, so that prompt chunks of every length do not each capture a graph).
struct GraphableChunks {
  int positions = 0;  // per sequence; 0: not graphable as equal chunks
  bool all_sampled = false;
};
constexpr int kMaxGraphedLastRowChunk = 17;
GraphableChunks graphable_chunks(const BatchPlan& plan);

// Pads a decode-only plan to `padded_sequences` with dummy sequences that write and read only `scratch_block` (their
// table rows, past the batch's, map to a table of scratch blocks), so that every array has the size a captured graph
// was recorded with.
void pad_decode_plan(BatchPlan& plan, int padded_sequences, int32_t scratch_block, int block_size);

// Pads a plan of equal chunks (graphable_chunks) to `padded_sequences` in the same way: each dummy sequence computes
// as many positions as the real ones, from nothing cached, reading and writing only `scratch_block`, and samples every
// position (all_sampled) or its last, greedily.
void pad_chunk_plan(BatchPlan& plan, int padded_sequences, int32_t scratch_block, int block_size, bool all_sampled);

}  // namespace qinfer::cuda
