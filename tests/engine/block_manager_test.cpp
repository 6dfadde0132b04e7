#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace qinfer {
namespace {

constexpr int32_t kBlockSize = 4;

Sequence make_sequence(std::vector<int32_t> tokens) {
  Sequence seq;
  seq.tokens = std::move(tokens);
  seq.num_prompt_tokens = seq.num_tokens();
  return seq;
}

std::vector<int32_t> iota_tokens(int32_t count, int32_t first) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

// Admits `seq` like the scheduler does: prefix match, allocate the rest, "compute" it, register full blocks.
void admit_and_compute(BlockManager& manager, Sequence& seq) {
  manager.update_block_hashes(seq);
  PrefixMatch match = manager.match_prefix(seq);
  int32_t num_new = seq.num_tokens() - match.num_tokens(kBlockSize);
  ASSERT_TRUE(manager.can_allocate(seq, match, num_new));
  manager.allocate(seq, match, num_new);
  seq.admitted_before = true;
  seq.num_computed += num_new;
  manager.register_computed_blocks(seq);
}

TEST(BlockManager, AllocateAppendFreeReturnsEveryBlock) {
  BlockManager manager(8, kBlockSize, /*enable_prefix_caching=*/false);
  Sequence seq = make_sequence(iota_tokens(6, 1));
  admit_and_compute(manager, seq);
  EXPECT_EQ(seq.block_table.size(), 2u);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  for (int i = 0; i < 5; ++i) {  // decode: one token per step
    seq.tokens.push_back(100 + i);
    ASSERT_TRUE(manager.can_append_slots(seq, 1));
    manager.append_slots(seq, 1);
    ++seq.num_computed;
  }
  EXPECT_EQ(seq.block_table.size(), 3u);  // 11 tokens
  const Sequence* holders[] = {&seq};
  EXPECT_EQ(manager.check_consistency(holders), "");
  manager.free(seq);
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_TRUE(seq.block_table.empty());
  EXPECT_EQ(manager.check_consistency({}), "");
}

TEST(BlockManager, CanAppendRefusesBeyondTheFreeBlocks) {
  BlockManager manager(2, kBlockSize, false);
  Sequence seq = make_sequence(iota_tokens(8, 1));
  admit_and_compute(manager, seq);
  EXPECT_EQ(manager.num_free_blocks(), 0);
  EXPECT_TRUE(manager.can_append_slots(seq, 0));
  EXPECT_FALSE(manager.can_append_slots(seq, 1));
}

TEST(BlockManager, SharedPrefixMapsTheSameBlocksAndLeavesOneTokenToCompute) {
  BlockManager manager(16, kBlockSize, true);
  Sequence first = make_sequence(iota_tokens(14, 1));  // 3 full blocks + 2 tokens
  admit_and_compute(manager, first);
  Sequence second = make_sequence(iota_tokens(12, 1));  // exactly 3 full blocks: the last one must be recomputed
  manager.update_block_hashes(second);
  PrefixMatch match = manager.match_prefix(second);
  ASSERT_EQ(match.blocks.size(), 2u);
  EXPECT_EQ(match.blocks[0], first.block_table[0]);
  EXPECT_EQ(match.blocks[1], first.block_table[1]);
  EXPECT_EQ(match.num_unreferenced, 0);
  manager.allocate(second, match, 4);
  EXPECT_EQ(second.num_computed, 8);
  EXPECT_NE(second.block_table[2], first.block_table[2]);
  EXPECT_EQ(manager.stats().prefix_hit_tokens, 8);
  EXPECT_EQ(manager.stats().prefix_query_tokens, 14 + 12);
  const Sequence* holders[] = {&first, &second};
  EXPECT_EQ(manager.check_consistency(holders), "");
}

TEST(BlockManager, HashChainDependsOnTheWholePrefix) {
  BlockManager manager(16, kBlockSize, true);
  Sequence first = make_sequence({1, 2, 3, 4, 5, 6, 7, 8, 9});
  admit_and_compute(manager, first);
  // Same second block, different first block: nothing may match.
  Sequence second = make_sequence({9, 2, 3, 4, 5, 6, 7, 8, 9});
  manager.update_block_hashes(second);
  EXPECT_TRUE(manager.match_prefix(second).blocks.empty());
  EXPECT_NE(first.block_hashes[1], second.block_hashes[1]);
}

TEST(BlockManager, FreedCachedBlocksStayMatchableUntilEvictedInLruOrder) {
  BlockManager manager(6, kBlockSize, true);
  Sequence older = make_sequence(iota_tokens(9, 1));   // blocks A0 A1 + partial
  Sequence newer = make_sequence(iota_tokens(9, 50));  // blocks B0 B1 + partial
  admit_and_compute(manager, older);
  admit_and_compute(manager, newer);
  manager.free(older);
  manager.free(newer);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  EXPECT_EQ(manager.num_cached_blocks(), 4);

  // Two fresh blocks come from the unhashed partial blocks; the next two evict the least recently freed (older's).
  Sequence filler = make_sequence(iota_tokens(16, 200));
  manager.update_block_hashes(filler);
  manager.allocate(filler, {}, 16);
  EXPECT_EQ(manager.stats().evictions, 2);

  Sequence again_older = make_sequence(iota_tokens(9, 1));
  manager.update_block_hashes(again_older);
  EXPECT_TRUE(manager.match_prefix(again_older).blocks.empty());
  Sequence again_newer = make_sequence(iota_tokens(9, 50));
  manager.update_block_hashes(again_newer);
  PrefixMatch match = manager.match_prefix(again_newer);
  EXPECT_EQ(match.blocks.size(), 2u);
  EXPECT_EQ(match.num_unreferenced, 2);
  // Mapping unreferenced cached blocks takes them out of the free pool.
  EXPECT_FALSE(manager.can_allocate(again_newer, match, 1));  // 2 cached + 1 fresh > 2 free
  manager.free(filler);
  ASSERT_TRUE(manager.can_allocate(again_newer, match, 1));
  manager.allocate(again_newer, match, 1);
  EXPECT_EQ(manager.num_free_blocks(), 3);
  EXPECT_EQ(again_newer.num_computed, 8);
  const Sequence* holders[] = {&again_newer};
  EXPECT_EQ(manager.check_consistency(holders), "");
}

TEST(BlockManager, PrefixCachingOffNeverMatches) {
  BlockManager manager(16, kBlockSize, false);
  Sequence first = make_sequence(iota_tokens(12, 1));
  admit_and_compute(manager, first);
  Sequence second = make_sequence(iota_tokens(12, 1));
  manager.update_block_hashes(second);
  EXPECT_TRUE(manager.match_prefix(second).blocks.empty());
  EXPECT_EQ(manager.num_cached_blocks(), 0);
}

TEST(BlockManager, ForkSharesFullPromptBlocksOnly) {
  BlockManager manager(16, kBlockSize, false);
  Sequence parent = make_sequence(iota_tokens(10, 1));  // 2 full blocks + 2 tokens
  admit_and_compute(manager, parent);
  parent.tokens.push_back(77);  // first sampled token
  Sequence child = make_sequence(iota_tokens(10, 1));
  PrefixMatch match = manager.match_fork(parent, child);
  ASSERT_EQ(match.blocks.size(), 2u);
  manager.allocate(child, match, 2);
  EXPECT_EQ(child.num_computed, 8);
  EXPECT_EQ(child.block_table[0], parent.block_table[0]);
  EXPECT_NE(child.block_table[2], parent.block_table[2]);  // the partial block is the child's own
  EXPECT_EQ(manager.num_free_blocks(), 16 - 3 - 1);
  const Sequence* holders[] = {&parent, &child};
  EXPECT_EQ(manager.check_consistency(holders), "");
  manager.free(parent);
  manager.free(child);
  EXPECT_EQ(manager.num_free_blocks(), 16);
}

}  // namespace
}  // namespace qinfer
