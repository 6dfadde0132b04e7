// Host-side plan of the prefill attention over an fp8 KV cache. The bf16 prefill attention kernel cannot read fp8
// blocks, so per layer the blocks that the step's prefill sequences attend to are dequantised into a bf16 scratch pool
// (kernels/kv_dequant_gather.h) and the unchanged bf16 kernel runs on the scratch through remapped block tables.
//
// When all contexts do not fit the scratch together, consecutive prefill sequences are split into groups that do; per
// layer, each group is gathered and attended in turn, reusing the scratch from block 0. A cache block referenced by
// several sequences of one group (a shared prefix) is gathered once.
//
// Using it for group g of plan p (prefill attention, all arrays uploaded as they are):
//   gather:    src_blocks + g.block_begin, valid_tokens + g.block_begin, num_blocks = g.num_blocks
//   attention: block_tables = scratch_tables (stride table_stride), table_rows = scratch_table_rows + g.first,
//              q_starts / q_lens / cached_lens (BatchPlan's prefill arrays) + g.first, num_prefill = g.last - g.first,
//              k/v_cache = the scratch, pool_blocks = the scratch capacity.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/batch_plan.h"

namespace qinfer::cuda {

// One prefill sequence as the gather sees it: its block-table row and the tokens it attends to (cached + new).
struct KvGatherSequence {
  std::span<const int32_t> block_table;  // at least ceil(context_len / block_size) cache block ids
  int context_len = 0;
};

// Prefill sequences [first, last) (indices in batch order) whose blocks sit in the scratch together; their scratch
// blocks are [0, num_blocks), gathered from src_blocks[block_begin, block_begin + num_blocks).
struct KvGatherGroup {
  int first = 0, last = 0;
  int block_begin = 0, num_blocks = 0;
};

struct KvGatherPlan {
  std::vector<KvGatherGroup> groups;  // [num_groups] in batch order, covering every prefill sequence once
  // Per group, concatenated (group g at groups[g].block_begin): scratch block s of the group is cache block
  // src_blocks[block_begin + s], whose first valid_tokens[block_begin + s] token slots hold context (the kernel writes
  // zeros past them).
  std::vector<int32_t> src_blocks;      // [total gathered blocks]
  std::vector<int32_t> valid_tokens;    // [total gathered blocks], 1..block_size
  int table_stride = 0;                 // columns of scratch_tables: the most blocks of one sequence
  std::vector<int32_t> scratch_tables;  // [num_prefill, table_stride] scratch block ids (within the group), 0-padded
  std::vector<int32_t> scratch_table_rows;  // [num_prefill] row of scratch_tables per prefill sequence: i
};

// Builds plans, reusing its vectors: allocation-free once the batches stop growing. Not thread-safe.
class KvGatherPlanner {
 public:
  // Plans `sequences` (the prefill sequences in batch order) for a scratch of `scratch_blocks` blocks. A sequence
  // whose context alone needs more blocks than that throws Error(kInvalidArgument) naming the numbers: the backend
  // sizes the scratch for max_model_len, so it is a bug. The returned plan stays valid until the next call.
  const KvGatherPlan& plan(std::span<const KvGatherSequence> sequences, int block_size, int scratch_blocks);

  // The same for the prefill sequences of a batch plan (its tables at prefill_table_rows, batch rows as plan_batch
  // made them, and prefill_cached_lens + prefill_q_lens).
  const KvGatherPlan& plan(const BatchPlan& batch, int block_size, int scratch_blocks);

 private:
  KvGatherPlan plan_;
  std::vector<KvGatherSequence> batch_sequences_;  // the BatchPlan overload's input
  std::vector<int32_t> scratch_of_cache_block_;    // [max cache block id + 1] scratch id in the current group, or -1
};

}  // namespace qinfer::cuda
