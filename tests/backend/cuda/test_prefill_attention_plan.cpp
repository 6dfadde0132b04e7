// The wgmma prefill attention's key splits (plan_prefill_attention_kv_splits), GPU-free.
#include <gtest/gtest.h>

#include "backend/cuda/kernels/prefill_attention_plan.h"

namespace qinfer::cuda {
namespace {

constexpr int kH200Sms = 132;

PrefillSplitShape chunk(int q_len, int cached, int decodes = 0, int capacity = 1 << 20) {
  return {.num_heads = 32,
          .num_prefill = 1,
          .max_q_len = q_len,
          .max_context_len = cached + q_len,
          .num_tokens = q_len + decodes,
          .split_rows_capacity = capacity};
}

TEST(PrefillAttentionPlan, ShortChunksAfterLongContextsFillOneWave) {
  // 16 tokens after 128 K: 32 blocks; 4 splits make 128, one wave.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(16, 131072), kH200Sms), 4);
  // 256 tokens: 64 blocks, 2 splits.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(256, 131072), kH200Sms), 2);
}

TEST(PrefillAttentionPlan, SplitsEvenOutAMostlyIdleLastWave) {
  // 640 tokens after 64 K: 160 blocks take two waves unsplit, the second with 28 of 132 SMs busy.
  const int splits = plan_prefill_attention_kv_splits(chunk(640, 65536, 32), kH200Sms);
  EXPECT_GT(splits, 1);
  // 512 tokens: 128 blocks are one wave already; splitting gains less than 1/16.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(512, 65536), kH200Sms), 1);
}

TEST(PrefillAttentionPlan, LongChunksAndShortContextsStayWhole) {
  // An 8 K chunk (2 048 blocks, 15.5 waves) and a fresh 1 K prompt.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(8192, 122880), kH200Sms), 1);
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(1024, 0), kH200Sms), 1);
  // Fewer than 2 x kPrefillMinTilesPerSplit tiles: nothing to split; twice that: two splits.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(5, 890), kH200Sms), 1);
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(5, 1019), kH200Sms), 2);
}

TEST(PrefillAttentionPlan, SplitsStayWithinTheBuffersAndTheLimit) {
  // Room for 2 splits of 20 rows only.
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(16, 131072, 4, 40), kH200Sms), 2);
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(16, 131072, 4, 39), kH200Sms), 1);
  EXPECT_EQ(plan_prefill_attention_kv_splits(chunk(16, 131072, 0, 0), kH200Sms), 1);
  // One head on a large GPU: many splits, at most kPrefillMaxSplits.
  PrefillSplitShape one_head = chunk(16, 131072);
  one_head.num_heads = 1;
  EXPECT_GT(plan_prefill_attention_kv_splits(one_head, kH200Sms), 8);
  EXPECT_LE(plan_prefill_attention_kv_splits(one_head, kH200Sms), kPrefillMaxSplits);
}

}  // namespace
}  // namespace qinfer::cuda
