// Device-resident block tables: the CUDA backend keeps one block-table row per batch slot on the device,
// [max_num_seqs + 1, max_blocks_per_sequence] int32 (the last row is all scratch blocks, for graph padding rows), and
// the attention kernels read a sequence's blocks from its slot's row (table_rows = the slot). Each step sends only
// the entries a row lacks: with BatchSequence's contract (backend.h) the entries before a sequence's cached
// positions are what its row already holds within one table generation, so a decode step sends one block id when it
// enters a new block and nothing otherwise, whatever the context length; a new generation sends the whole table.
// This class is the host side of it (no GPU): per slot what the device row holds, and per batch the writes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/batch_plan.h"
#include "backend/cuda/kernels/block_table_scatter.h"

namespace qinfer::cuda {

// What one batch adds to the device tables, in the order of the batch's sequences.
struct BlockTableUpdate {
  std::vector<int32_t> rows;            // [num_sequences] device table row of each sequence
  std::vector<BlockTableWrite> writes;  // [num_writes] at most one per sequence
  std::vector<int32_t> block_ids;       // [sum of the writes' counts]
  // Bytes the update puts in the step's upload (the writes and their block ids; the rows travel in the plan's
  // table_rows arrays).
  size_t upload_bytes() const { return writes.size() * sizeof(BlockTableWrite) + block_ids.size() * sizeof(int32_t); }
};

class BlockTableSlots {
 public:
  // max_blocks_per_sequence: the tables' columns, ceil(max_model_len / block_size).
  BlockTableSlots(int max_num_seqs, int max_blocks_per_sequence);

  int num_rows() const { return static_cast<int>(slots_.size()) + 1; }
  int scratch_row() const { return static_cast<int>(slots_.size()); }  // every column the scratch block
  int stride() const { return stride_; }
  // Bytes of the device tables.
  static int64_t device_bytes(int max_num_seqs, int max_blocks_per_sequence) {
    return (int64_t{max_num_seqs} + 1) * max_blocks_per_sequence * static_cast<int64_t>(sizeof(int32_t));
  }

  // Checks the batch's slots: each in [kNoSlot, max_num_seqs), none given twice (throws Error(kInvalidArgument)
  // naming the sequence and slot, changing nothing).
  void check_slots(const Batch& batch) const;

  // The rows and writes of a batch whose slots check_slots() accepted and whose block tables validate_batch did:
  // a sequence with a slot uses that slot's row and sends the entries from its cached blocks on (all of them after a
  // generation change), a kNoSlot sequence borrows a row no sequence of the batch holds and sends its whole table.
  // A batch has at most max_num_seqs sequences. Records that the device rows hold the result: the caller must apply
  // the writes before the next step reads the tables. Valid until the next call.
  const BlockTableUpdate& update(const Batch& batch, int block_size);

 private:
  struct SlotState {
    bool known = false;       // the row holds a table of `generation` (false: never filled, or borrowed since)
    uint64_t generation = 0;  // BatchSequence::table_generation
    int32_t blocks = 0;       // columns written for it, from 0
  };
  void write(int32_t row, int32_t first_column, std::span<const int32_t> ids);

  int stride_ = 0;
  std::vector<SlotState> slots_;  // [max_num_seqs]
  std::vector<uint8_t> taken_;    // [max_num_seqs] rows the batch being updated holds
  BlockTableUpdate update_;
};

// Maps the plan's table rows (batch rows, padding rows past them) to the device tables' rows: `rows` of the batch's
// sequences, `scratch_row` for padding.
void map_table_rows(BatchPlan& plan, const std::vector<int32_t>& rows, int32_t scratch_row);

}  // namespace qinfer::cuda
