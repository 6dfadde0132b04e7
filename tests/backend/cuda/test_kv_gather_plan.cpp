// Host-side plan of the fp8-KV prefill gather (no GPU needed): hand-worked cases, the error of a context larger than
// the scratch, and random batches checked token by token against the block tables they came from.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "backend/cuda/kv_gather_plan.h"
#include "util/error.h"

namespace qinfer::cuda {
namespace {

using Tables = std::vector<std::vector<int32_t>>;

std::vector<KvGatherSequence> sequences_of(const Tables& tables, const std::vector<int>& context_lens) {
  std::vector<KvGatherSequence> sequences;
  for (size_t i = 0; i < tables.size(); ++i) sequences.push_back({tables[i], context_lens[i]});
  return sequences;
}

TEST(KvGatherPlan, OneGroupWhenEverythingFits) {
  const Tables tables = {{7, 3, 9}, {4, 5}};
  KvGatherPlanner planner;
  // 40 tokens = blocks 7, 3 full and 8 tokens of 9; 17 tokens = block 4 full and 1 token of 5.
  const KvGatherPlan& plan = planner.plan(sequences_of(tables, {40, 17}), 16, 8);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].first, 0);
  EXPECT_EQ(plan.groups[0].last, 2);
  EXPECT_EQ(plan.groups[0].block_begin, 0);
  EXPECT_EQ(plan.groups[0].num_blocks, 5);
  EXPECT_EQ(plan.src_blocks, (std::vector<int32_t>{7, 3, 9, 4, 5}));
  EXPECT_EQ(plan.valid_tokens, (std::vector<int32_t>{16, 16, 8, 16, 1}));
  EXPECT_EQ(plan.table_stride, 3);
  EXPECT_EQ(plan.scratch_tables, (std::vector<int32_t>{0, 1, 2, 3, 4, 0}));
  EXPECT_EQ(plan.scratch_table_rows, (std::vector<int32_t>{0, 1}));
}

TEST(KvGatherPlan, SplitsIntoGroupsThatFitAndKeepsOrder) {
  const Tables tables = {{1, 2}, {3, 4, 5}, {6}};
  KvGatherPlanner planner;
  // 2 + 3 blocks exceed a 4-block scratch; 3 + 1 fit.
  const KvGatherPlan& plan = planner.plan(sequences_of(tables, {32, 33, 16}), 16, 4);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].first, 0);
  EXPECT_EQ(plan.groups[0].last, 1);
  EXPECT_EQ(plan.groups[0].block_begin, 0);
  EXPECT_EQ(plan.groups[0].num_blocks, 2);
  EXPECT_EQ(plan.groups[1].first, 1);
  EXPECT_EQ(plan.groups[1].last, 3);
  EXPECT_EQ(plan.groups[1].block_begin, 2);
  EXPECT_EQ(plan.groups[1].num_blocks, 4);
  EXPECT_EQ(plan.src_blocks, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(plan.valid_tokens, (std::vector<int32_t>{16, 16, 16, 16, 1, 16}));
  // Scratch ids restart at 0 in each group.
  EXPECT_EQ(plan.scratch_tables, (std::vector<int32_t>{0, 1, 0, 0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(plan.scratch_table_rows, (std::vector<int32_t>{0, 1, 2}));
}

TEST(KvGatherPlan, SharedPrefixBlocksAreGatheredOnceWithTheLongerFill) {
  const Tables tables = {{10, 11, 12}, {10, 11, 13}, {10}};
  KvGatherPlanner planner;
  // 4 distinct blocks fit a 4-block scratch although the tables list 7; block 10 is fully used by the first two.
  const KvGatherPlan& plan = planner.plan(sequences_of(tables, {40, 48, 5}), 16, 4);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.src_blocks, (std::vector<int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(plan.valid_tokens, (std::vector<int32_t>{16, 16, 8, 16}));
  EXPECT_EQ(plan.scratch_tables, (std::vector<int32_t>{0, 1, 2, 0, 1, 3, 0, 0, 0}));

  // A partial block shared by two contexts of different lengths keeps the longer one.
  const Tables partial = {{20}, {20}};
  const KvGatherPlan& second = planner.plan(sequences_of(partial, {5, 9}), 16, 4);
  EXPECT_EQ(second.src_blocks, (std::vector<int32_t>{20}));
  EXPECT_EQ(second.valid_tokens, (std::vector<int32_t>{9}));
}

TEST(KvGatherPlan, ContextLargerThanTheScratchIsAnError) {
  const Tables tables = {{1}, {2, 3, 4, 5, 6}};
  KvGatherPlanner planner;
  try {
    planner.plan(sequences_of(tables, {10, 65}), 16, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    const std::string message = e.what();
    EXPECT_NE(message.find("sequence 1"), std::string::npos) << message;
    EXPECT_NE(message.find("65 tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("5 blocks of 16"), std::string::npos) << message;
    EXPECT_NE(message.find("scratch's 4"), std::string::npos) << message;
  }
}

TEST(KvGatherPlan, ShortBlockTableIsAnError) {
  const Tables tables = {{1}};
  KvGatherPlanner planner;
  EXPECT_THROW(planner.plan(sequences_of(tables, {17}), 16, 4), Error);
}

TEST(KvGatherPlan, EmptyInputGivesAnEmptyPlan) {
  KvGatherPlanner planner;
  const KvGatherPlan& plan = planner.plan(std::span<const KvGatherSequence>{}, 16, 4);
  EXPECT_TRUE(plan.groups.empty());
  EXPECT_TRUE(plan.src_blocks.empty());
  EXPECT_TRUE(plan.valid_tokens.empty());
  EXPECT_TRUE(plan.scratch_tables.empty());
  EXPECT_TRUE(plan.scratch_table_rows.empty());
  EXPECT_EQ(plan.table_stride, 0);
}

TEST(KvGatherPlan, ReadsThePrefillSequencesOfABatchPlan) {
  const std::vector<int32_t> prefill_a = {7, 3, 9}, decode = {4}, prefill_b = {8, 2};
  const auto sequence = [](int num_tokens, int num_cached, std::span<const int32_t> table) {
    BatchSequence s;
    s.num_tokens = num_tokens;
    s.num_cached = num_cached;
    s.block_table = table;
    return s;
  };
  Batch batch;
  batch.token_ids.assign(3 + 1 + 20, 0);
  batch.sequences = {sequence(3, 30, prefill_a), sequence(1, 5, decode), sequence(20, 0, prefill_b)};
  const BatchPlan batch_plan = plan_batch(batch, 16, 1000);
  KvGatherPlanner planner;
  const KvGatherPlan& plan = planner.plan(batch_plan, 16, 8);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].last, 2);
  EXPECT_EQ(plan.src_blocks, (std::vector<int32_t>{7, 3, 9, 8, 2}));
  EXPECT_EQ(plan.valid_tokens, (std::vector<int32_t>{16, 16, 1, 16, 4}));
  EXPECT_EQ(plan.scratch_tables, (std::vector<int32_t>{0, 1, 2, 3, 4, 0}));
}

int blocks_of(int context_len) { return (context_len + 15) / 16; }

// Every context token of every sequence must be found through its scratch table in a gathered block that is the
// cache block of its own table, filled at least up to it; groups must be contiguous, in order, fit the scratch, and
// end only where the next sequence would not have fit (greedy).
void check_against_tables(const KvGatherPlan& plan, const Tables& tables, const std::vector<int>& context_lens,
                          int scratch_blocks) {
  int next_first = 0, next_block_begin = 0;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const KvGatherGroup& group = plan.groups[g];
    ASSERT_EQ(group.first, next_first);
    ASSERT_EQ(group.block_begin, next_block_begin);
    ASSERT_LT(group.first, group.last);
    ASSERT_LE(group.num_blocks, scratch_blocks);
    std::set<int32_t> distinct;
    for (int i = group.first; i < group.last; ++i)
      for (int j = 0; j < blocks_of(context_lens[i]); ++j) distinct.insert(tables[i][j]);
    ASSERT_EQ(static_cast<int>(distinct.size()), group.num_blocks);
    if (g + 1 < plan.groups.size()) {
      for (int j = 0; j < blocks_of(context_lens[group.last]); ++j) distinct.insert(tables[group.last][j]);
      EXPECT_GT(static_cast<int>(distinct.size()), scratch_blocks) << "group " << g << " closed too early";
    }
    for (int i = group.first; i < group.last; ++i) {
      EXPECT_EQ(plan.scratch_table_rows[i], i);
      for (int t = 0; t < context_lens[i]; ++t) {
        const int32_t scratch = plan.scratch_tables[static_cast<size_t>(i) * plan.table_stride + t / 16];
        ASSERT_GE(scratch, 0);
        ASSERT_LT(scratch, group.num_blocks);
        ASSERT_EQ(plan.src_blocks[group.block_begin + scratch], tables[i][t / 16])
            << "sequence " << i << " token " << t;
        ASSERT_GT(plan.valid_tokens[group.block_begin + scratch], t % 16) << "sequence " << i << " token " << t;
      }
    }
    next_first = group.last;
    next_block_begin += group.num_blocks;
  }
  EXPECT_EQ(next_first, static_cast<int>(tables.size()));
  EXPECT_EQ(next_block_begin, static_cast<int>(plan.src_blocks.size()));
  EXPECT_EQ(plan.valid_tokens.size(), plan.src_blocks.size());
}

TEST(KvGatherPlan, RandomBatchesMapEveryTokenToItsCacheBlock) {
  std::mt19937 rng(1234);
  KvGatherPlanner planner;  // reused across batches, as the backend does
  for (int trial = 0; trial < 200; ++trial) {
    const int scratch_blocks = std::uniform_int_distribution<int>(1, 24)(rng);
    const int num_sequences = std::uniform_int_distribution<int>(0, 8)(rng);
    const std::vector<int32_t> shared_prefix = {900, 901, 902, 903};  // some sequences start with it
    Tables tables;
    std::vector<int> context_lens;
    int32_t next_block = std::uniform_int_distribution<int>(0, 50)(rng);
    for (int s = 0; s < num_sequences; ++s) {
      const int context = std::uniform_int_distribution<int>(1, scratch_blocks * 16)(rng);
      std::vector<int32_t> table;
      const bool shares = rng() % 3 == 0;
      for (int j = 0; j < blocks_of(context); ++j) {
        table.push_back(shares && j < 4 ? shared_prefix[j] : next_block);
        next_block += 1 + static_cast<int32_t>(rng() % 3);
      }
      table.push_back(-5);  // past the context: never read
      tables.push_back(table);
      context_lens.push_back(context);
    }
    const KvGatherPlan& plan = planner.plan(sequences_of(tables, context_lens), 16, scratch_blocks);
    SCOPED_TRACE("trial " + std::to_string(trial));
    check_against_tables(plan, tables, context_lens, scratch_blocks);
  }
}

}  // namespace
}  // namespace qinfer::cuda
