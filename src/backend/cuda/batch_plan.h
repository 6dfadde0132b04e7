// Host-side planning of one batch: the per-token and per-sequence metadata the kernels read, built on the host and
// copied to the device in one transfer.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels/sampling.h"

namespace qinfer::cuda {

struct BatchPlan {
  int num_tokens = 0;
  std::vector<int32_t> token_ids;  // [num_tokens]
  std::vector<int32_t> positions;  // [num_tokens]
  std::vector<int64_t> slots;      // [num_tokens] KV slot: block * block_size + offset

  int block_table_stride = 0;
  std::vector<int32_t> block_tables;  // [num_sequences, block_table_stride], padded with 0

  // Sequences with one new token use the decode attention kernel, the others the prefill kernel.
  std::vector<int32_t> decode_table_rows, decode_q_rows, decode_context_lens;  // [num_decode]
  int max_decode_context = 0;
  std::vector<int32_t> prefill_table_rows, prefill_q_starts, prefill_q_lens, prefill_cached_lens;  // [num_prefill]
  int max_prefill_q_len = 0;

  std::vector<int32_t> sample_rows;                   // [num_sampled] token row whose hidden state is sampled
  std::vector<DeviceSamplingParams> sampling_params;  // [num_sampled]
  std::vector<PenaltyEntry> penalties;                // entries referenced by sampling_params
};

// Builds the plan of a validated batch.
BatchPlan plan_batch(const Batch& batch, int block_size, int vocab);

// Whether a plan can run as a captured decode graph: decode only, every sequence sampled.
bool is_graphable_decode(const BatchPlan& plan);

// Pads a decode-only plan to `padded_sequences` with dummy sequences that write and read only `scratch_block`, and
// widens the block tables to `stride` columns (the new columns and the dummy rows point to the scratch block; entries
// past a sequence's blocks are never read), so that every array has the size a captured graph was recorded with.
void pad_decode_plan(BatchPlan& plan, int padded_sequences, int stride, int32_t scratch_block, int block_size);

}  // namespace qinfer::cuda
