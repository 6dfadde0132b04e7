#include "backend/cuda/block_table_slots.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace qinfer::cuda {

BlockTableSlots::BlockTableSlots(int max_num_seqs, int max_blocks_per_sequence)
    : stride_(max_blocks_per_sequence),
      slots_(static_cast<size_t>(max_num_seqs)),
      taken_(static_cast<size_t>(max_num_seqs), 0) {
  QINFER_CHECK(max_num_seqs > 0 && max_blocks_per_sequence > 0);
}

void BlockTableSlots::check_slots(const Batch& batch) const {
  const int max_num_seqs = static_cast<int>(slots_.size());
  std::vector<uint8_t> seen(slots_.size(), 0);
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const int32_t slot = batch.sequences[i].slot;
    if (slot == BatchSequence::kNoSlot) continue;
    const std::string which = "invalid batch: sequence " + std::to_string(i) + " has slot " + std::to_string(slot);
    if (slot < 0 || slot >= max_num_seqs)
      throw Error(ErrorKind::kInvalidArgument,
                  which + ", outside [0, max_num_seqs " + std::to_string(max_num_seqs) + ") and not kNoSlot (-1)");
    if (seen[static_cast<size_t>(slot)]++)
      throw Error(ErrorKind::kInvalidArgument, which + ", which an earlier sequence of the batch has too");
  }
}

void BlockTableSlots::write(int32_t row, int32_t first_column, std::span<const int32_t> ids) {
  if (ids.empty()) return;
  update_.writes.push_back(
      {row, first_column, static_cast<int32_t>(ids.size()), static_cast<int32_t>(update_.block_ids.size())});
  update_.block_ids.insert(update_.block_ids.end(), ids.begin(), ids.end());
}

const BlockTableUpdate& BlockTableSlots::update(const Batch& batch, int block_size) {
  update_.rows.assign(batch.sequences.size(), 0);
  update_.writes.clear();
  update_.block_ids.clear();
  for (const BatchSequence& s : batch.sequences)
    if (s.slot != BatchSequence::kNoSlot) taken_[static_cast<size_t>(s.slot)] = 1;
  size_t next_free_row = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const BatchSequence& s = batch.sequences[i];
    const int32_t blocks = (s.num_cached + s.num_tokens + block_size - 1) / block_size;
    const std::span<const int32_t> table = s.block_table.first(static_cast<size_t>(blocks));
    if (s.slot == BatchSequence::kNoSlot) {
      // A batch has at most max_num_seqs sequences, so a row is left for each one without a slot.
      while (taken_[next_free_row]) ++next_free_row;
      taken_[next_free_row] = 1;
      slots_[next_free_row].known = false;  // a sequence of this slot must send its whole table again
      update_.rows[i] = static_cast<int32_t>(next_free_row);
      write(update_.rows[i], 0, table);
      continue;
    }
    SlotState& state = slots_[static_cast<size_t>(s.slot)];
    update_.rows[i] = s.slot;
    int32_t first = 0;
    if (state.known && state.generation == s.table_generation) {
      const int32_t cached_blocks = (s.num_cached + block_size - 1) / block_size;
      first = std::min(state.blocks, cached_blocks);
    }
    write(s.slot, first, table.subspan(static_cast<size_t>(std::min(first, blocks))));
    state = {true, s.table_generation, blocks};
  }
  std::fill(taken_.begin(), taken_.end(), 0);
  return update_;
}

void map_table_rows(BatchPlan& plan, const std::vector<int32_t>& rows, int32_t scratch_row) {
  const auto map = [&](int32_t& row) {
    row = static_cast<size_t>(row) < rows.size() ? rows[static_cast<size_t>(row)] : scratch_row;
  };
  std::for_each(plan.decode_table_rows.begin(), plan.decode_table_rows.end(), map);
  std::for_each(plan.prefill_table_rows.begin(), plan.prefill_table_rows.end(), map);
}

}  // namespace qinfer::cuda
