#include "backend/cuda/kv_gather_plan.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace qinfer::cuda {

namespace {

int blocks_of(int context_len, int block_size) { return (context_len + block_size - 1) / block_size; }

void validate(std::span<const KvGatherSequence> sequences, int block_size, int scratch_blocks) {
  if (block_size <= 0 || scratch_blocks <= 0) {
    throw Error(ErrorKind::kInvalidArgument, "KV gather plan: block size " + std::to_string(block_size) +
                                                 " and scratch blocks " + std::to_string(scratch_blocks) +
                                                 " must be positive");
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    const KvGatherSequence& s = sequences[i];
    const std::string which = "KV gather plan: prefill sequence " + std::to_string(i) + " ";
    if (s.context_len < 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  which + "has a negative context length " + std::to_string(s.context_len));
    }
    const int blocks = blocks_of(s.context_len, block_size);
    if (blocks > scratch_blocks) {
      throw Error(ErrorKind::kInvalidArgument, which + "attends to " + std::to_string(s.context_len) + " tokens = " +
                                                   std::to_string(blocks) + " blocks of " + std::to_string(block_size) +
                                                   ", more than the scratch's " + std::to_string(scratch_blocks));
    }
    if (static_cast<size_t>(blocks) > s.block_table.size()) {
      throw Error(ErrorKind::kInvalidArgument, which + "needs " + std::to_string(blocks) +
                                                   " blocks but its block table has " +
                                                   std::to_string(s.block_table.size()));
    }
    for (int j = 0; j < blocks; ++j) {
      if (s.block_table[j] < 0) {
        throw Error(ErrorKind::kInvalidArgument, which + "has a negative cache block id " +
                                                     std::to_string(s.block_table[j]) + " at column " +
                                                     std::to_string(j));
      }
    }
  }
}

}  // namespace

const KvGatherPlan& KvGatherPlanner::plan(std::span<const KvGatherSequence> sequences, int block_size,
                                          int scratch_blocks) {
  validate(sequences, block_size, scratch_blocks);
  KvGatherPlan& p = plan_;
  p.groups.clear();
  p.src_blocks.clear();
  p.valid_tokens.clear();
  p.table_stride = 0;
  int32_t max_block_id = -1;
  for (const KvGatherSequence& s : sequences) {
    const int blocks = blocks_of(s.context_len, block_size);
    p.table_stride = std::max(p.table_stride, blocks);
    for (int j = 0; j < blocks; ++j) max_block_id = std::max(max_block_id, s.block_table[j]);
  }
  const int num_prefill = static_cast<int>(sequences.size());
  p.scratch_tables.assign(static_cast<size_t>(num_prefill) * p.table_stride, 0);
  p.scratch_table_rows.resize(sequences.size());
  for (int i = 0; i < num_prefill; ++i) p.scratch_table_rows[i] = i;
  if (scratch_of_cache_block_.size() < static_cast<size_t>(max_block_id + 1)) {
    scratch_of_cache_block_.resize(static_cast<size_t>(max_block_id + 1), -1);
  }

  // Greedy: a sequence joins the open group while the group's distinct blocks still fit the scratch.
  auto close_group = [&](KvGatherGroup& group) {
    for (int s = 0; s < group.num_blocks; ++s) scratch_of_cache_block_[p.src_blocks[group.block_begin + s]] = -1;
    p.groups.push_back(group);
  };
  KvGatherGroup group;
  for (int i = 0; i < num_prefill; ++i) {
    const KvGatherSequence& s = sequences[i];
    const int blocks = blocks_of(s.context_len, block_size);
    int new_blocks = 0;
    for (int j = 0; j < blocks; ++j) new_blocks += scratch_of_cache_block_[s.block_table[j]] < 0 ? 1 : 0;
    if (group.num_blocks + new_blocks > scratch_blocks) {
      close_group(group);
      group = KvGatherGroup{i, i, static_cast<int>(p.src_blocks.size()), 0};
    }
    int32_t* table_row = p.scratch_tables.data() + static_cast<size_t>(i) * p.table_stride;
    for (int j = 0; j < blocks; ++j) {
      const int32_t cache_block = s.block_table[j];
      const int32_t valid = std::min(block_size, s.context_len - j * block_size);
      int32_t& scratch = scratch_of_cache_block_[cache_block];
      if (scratch < 0) {
        scratch = group.num_blocks++;
        p.src_blocks.push_back(cache_block);
        p.valid_tokens.push_back(valid);
      } else {  // shared with an earlier sequence of the group: gather the longer of the two fills
        int32_t& gathered = p.valid_tokens[group.block_begin + scratch];
        gathered = std::max(gathered, valid);
      }
      table_row[j] = scratch;
    }
    group.last = i + 1;
  }
  if (num_prefill > 0) close_group(group);
  return p;
}

const KvGatherPlan& KvGatherPlanner::plan(const BatchPlan& batch, int block_size, int scratch_blocks) {
  const size_t num_prefill = batch.prefill_table_rows.size();
  QINFER_CHECK(batch.prefill_cached_lens.size() == num_prefill && batch.prefill_q_lens.size() == num_prefill);
  batch_sequences_.resize(num_prefill);
  for (size_t i = 0; i < num_prefill; ++i) {
    batch_sequences_[i].block_table = batch.tables[static_cast<size_t>(batch.prefill_table_rows[i])];
    batch_sequences_[i].context_len = batch.prefill_cached_lens[i] + batch.prefill_q_lens[i];
  }
  return plan(batch_sequences_, block_size, scratch_blocks);
}

}  // namespace qinfer::cuda
