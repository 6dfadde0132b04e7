// The host side of the device-resident block tables (no GPU needed): what BlockTableSlots sends per step, applied to
// a host copy of the device tables, must leave each sequence's row equal to its table, while a decode step sends
// O(new blocks) whatever the context, and a new generation or a row lent to a slotless sequence sends everything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/block_table_slots.h"
#include "testing/batch_test_util.h"
#include "util/error.h"

namespace qinfer::cuda {
namespace {

constexpr int kBlockSize = 16;

// The device tables as the scatter kernel leaves them.
class TablesMirror {
 public:
  explicit TablesMirror(const BlockTableSlots& slots)
      : stride_(slots.stride()), tables_(static_cast<size_t>(slots.num_rows()) * slots.stride(), -1) {}
  void apply(const BlockTableUpdate& update) {
    for (const BlockTableWrite& w : update.writes) {
      ASSERT_LE(w.first_column + w.count, stride_);
      for (int i = 0; i < w.count; ++i)
        tables_[static_cast<size_t>(w.row) * stride_ + w.first_column + i] = update.block_ids[w.source + i];
    }
  }
  // Each sequence's row holds its table's blocks of its context.
  void expect_rows_hold(const Batch& batch, const BlockTableUpdate& update, const std::string& what) const {
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const BatchSequence& s = batch.sequences[i];
      const int blocks = (s.num_cached + s.num_tokens + kBlockSize - 1) / kBlockSize;
      for (int b = 0; b < blocks; ++b)
        EXPECT_EQ(tables_[static_cast<size_t>(update.rows[i]) * stride_ + b], s.block_table[b])
            << what << ": sequence " << i << " column " << b;
    }
  }

 private:
  int stride_;
  std::vector<int32_t> tables_;
};

BatchSequence sequence(int num_tokens, int num_cached, const std::vector<int32_t>& table, int32_t slot,
                       uint64_t generation) {
  BatchSequence s = testing::batch_sequence(num_tokens, num_cached, table, nullptr);
  s.slot = slot;
  s.table_generation = generation;
  return s;
}

std::vector<int32_t> consecutive_blocks(int first, int count) {
  std::vector<int32_t> table(static_cast<size_t>(count));
  for (int b = 0; b < count; ++b) table[static_cast<size_t>(b)] = first + b;
  return table;
}

// 33 decoding rows beside one 128 K sequence (max_model_len 256 K: 16 384 columns): the whole tables are sent once,
// then each step sends only the blocks a row enters, never more than a write per row.
TEST(BlockTableSlots, DecodeStepsSendOnlyTheirNewBlocks) {
  constexpr int kLong = 128 * 1024, kShort = 1000, kRows = 33, kSteps = 64;
  BlockTableSlots slots(64, 256 * 1024 / kBlockSize);
  TablesMirror mirror(slots);
  std::vector<std::vector<int32_t>> tables;
  tables.push_back(consecutive_blocks(0, (kLong + kSteps) / kBlockSize + 1));
  for (int r = 1; r < kRows; ++r)
    tables.push_back(consecutive_blocks(10000 + r * 100, (kShort + kSteps) / kBlockSize + 1));
  const auto decode = [&](int step) {
    Batch batch;
    for (int r = 0; r < kRows; ++r) {
      const int context = (r == 0 ? kLong : kShort) + step;
      batch.sequences.push_back(sequence(1, context, tables[static_cast<size_t>(r)], r + 7, 100 + r));
    }
    return batch;
  };
  Batch first = decode(0);
  const BlockTableUpdate& full = slots.update(first, kBlockSize);
  mirror.apply(full);
  mirror.expect_rows_hold(first, full, "first step");
  EXPECT_EQ(full.writes.size(), static_cast<size_t>(kRows));
  EXPECT_GT(full.upload_bytes(), size_t{kLong / kBlockSize * 4});
  size_t sent_ids = 0;
  for (int step = 1; step <= kSteps; ++step) {
    Batch batch = decode(step);
    const BlockTableUpdate& update = slots.update(batch, kBlockSize);
    mirror.apply(update);
    mirror.expect_rows_hold(batch, update, "step " + std::to_string(step));
    EXPECT_EQ(update.rows[0], 7);
    EXPECT_LE(update.upload_bytes(), kRows * (sizeof(BlockTableWrite) + sizeof(int32_t)));
    for (const BlockTableWrite& w : update.writes) EXPECT_EQ(w.count, 1);
    sent_ids += update.block_ids.size();
  }
  // Each row enters a new block every 16 positions: 4 or 5 of them in 64 steps (positions from 1 000 or 128 K on).
  EXPECT_LE(sent_ids, static_cast<size_t>(kRows * (kSteps / kBlockSize + 1)));
  // The rectangle the tables replaced: [33, 16 384] int32 every step.
  EXPECT_EQ(size_t{kRows} * (256 * 1024 / kBlockSize) * sizeof(int32_t), 2162688u);
}

TEST(BlockTableSlots, ANewGenerationSendsTheWholeTable) {
  BlockTableSlots slots(4, 32);
  TablesMirror mirror(slots);
  const std::vector<int32_t> first = {3, 4, 5, 6}, second = {9, 8, 7, 6, 10};
  Batch batch;
  batch.sequences = {sequence(40, 0, first, 2, 1)};
  mirror.apply(slots.update(batch, kBlockSize));
  // The slot's next table maps two cached blocks (a prefix-cache hit) and computes more: all of it is sent.
  batch.sequences = {sequence(20, 32, second, 2, 2)};
  const BlockTableUpdate& update = slots.update(batch, kBlockSize);
  ASSERT_EQ(update.writes.size(), 1u);
  EXPECT_EQ(update.writes[0].first_column, 0);
  EXPECT_EQ(update.writes[0].count, 4);
  mirror.apply(update);
  mirror.expect_rows_hold(batch, update, "new generation");
  // The same generation again: a chunk inside the block of the last cached position sends nothing, one into a
  // new block sends that block.
  batch.sequences = {sequence(4, 52, second, 2, 2)};
  EXPECT_TRUE(slots.update(batch, kBlockSize).writes.empty());
  batch.sequences = {sequence(13, 56, second, 2, 2)};
  const BlockTableUpdate& next = slots.update(batch, kBlockSize);
  ASSERT_EQ(next.writes.size(), 1u);
  EXPECT_EQ(next.writes[0].first_column, 4);
  EXPECT_EQ(next.writes[0].count, 1);
  mirror.apply(next);
  mirror.expect_rows_hold(batch, next, "appended block");
}

// Rejected speculative tokens: blocks past num_computed are released and others take their columns in the same
// generation; everything from the cached blocks on is sent again.
TEST(BlockTableSlots, ReplacedTailBlocksAreSentAgain) {
  BlockTableSlots slots(4, 32);
  TablesMirror mirror(slots);
  std::vector<int32_t> table = {1, 2, 3};
  Batch batch;
  batch.sequences = {sequence(20, 20, table, 0, 5)};  // positions 20..39: columns 1 and 2
  mirror.apply(slots.update(batch, kBlockSize));
  table[2] = 11;  // only 30 positions kept: column 2 released, then taken by block 11
  batch.sequences = {sequence(5, 30, table, 0, 5)};
  const BlockTableUpdate& update = slots.update(batch, kBlockSize);
  mirror.apply(update);
  mirror.expect_rows_hold(batch, update, "after the replacement");
  ASSERT_EQ(update.writes.size(), 1u);
  EXPECT_EQ(update.writes[0].first_column, 2);  // from the first block past the cached positions
}

TEST(BlockTableSlots, SlotlessSequencesBorrowFreeRowsWhoseSlotsSendEverythingAgain) {
  BlockTableSlots slots(3, 8);
  TablesMirror mirror(slots);
  const std::vector<int32_t> a = {1, 2}, b = {3, 4}, d = {5, 6};
  Batch batch;
  batch.sequences = {sequence(20, 0, a, 0, 1), sequence(20, 0, b, 1, 2)};
  mirror.apply(slots.update(batch, kBlockSize));
  batch.sequences = {sequence(1, 20, a, 0, 1), sequence(20, 0, d, BatchSequence::kNoSlot, 0)};
  const BlockTableUpdate& lent = slots.update(batch, kBlockSize);
  EXPECT_EQ(lent.rows, (std::vector<int32_t>{0, 1}));  // the first row no sequence of the batch holds
  mirror.apply(lent);
  mirror.expect_rows_hold(batch, lent, "slotless");
  batch.sequences = {sequence(1, 20, b, 1, 2)};
  const BlockTableUpdate& back = slots.update(batch, kBlockSize);
  ASSERT_EQ(back.writes.size(), 1u);
  EXPECT_EQ(back.writes[0].first_column, 0);
  mirror.apply(back);
  mirror.expect_rows_hold(batch, back, "slot 1 back");
}

TEST(BlockTableSlots, RefusesSlotsOutOfRangeOrRepeated) {
  BlockTableSlots slots(3, 8);
  const std::vector<int32_t> table = {1};
  Batch batch;
  batch.sequences = {sequence(1, 0, table, 3, 1)};
  EXPECT_THROW(slots.check_slots(batch), Error);
  batch.sequences = {sequence(1, 0, table, -2, 1)};
  EXPECT_THROW(slots.check_slots(batch), Error);
  batch.sequences = {sequence(1, 0, table, 1, 1), sequence(1, 0, table, 1, 2)};
  EXPECT_THROW(slots.check_slots(batch), Error);
  batch.sequences = {sequence(1, 0, table, 1, 1), sequence(1, 0, table, BatchSequence::kNoSlot, 0),
                     sequence(1, 0, table, BatchSequence::kNoSlot, 0)};
  EXPECT_NO_THROW(slots.check_slots(batch));
  EXPECT_EQ(slots.update(batch, kBlockSize).rows, (std::vector<int32_t>{1, 0, 2}));
}

TEST(BlockTableSlots, PaddingRowsMapToTheScratchRow) {
  BatchPlan plan;
  plan.decode_table_rows = {0, 1, 2, 3};  // two sequences, two padding rows
  plan.prefill_table_rows = {};
  map_table_rows(plan, {5, 2}, 9);
  EXPECT_EQ(plan.decode_table_rows, (std::vector<int32_t>{5, 2, 9, 9}));
}

}  // namespace
}  // namespace qinfer::cuda
