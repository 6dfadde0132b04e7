// Cost-based prefill chunking: the cost model (prefill_cost.h) and the scheduler cutting a long prompt's late chunks
// by it while the decodes beside them still run every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "engine/prefill_cost.h"
#include "engine/scheduler.h"
#include "model/config.h"
#include "model/test_model.h"
#include "scheduler_harness.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

// Qwen3-4B's shape: hidden 2560, intermediate 9728, 36 layers, 32 q / 8 kv heads of 128.
ModelConfig qwen3_4b() { return test_model_preset("4b-shape"); }

TEST(PrefillCost, Qwen3_4BRatioIsAttentionOverLinearFlops) {
  // Attention: 4 * 36 layers * 32 heads * 128. Linear per token: 2 * 36 * (q 2560x4096 + k, v 2560x1024 each +
  // o 4096x2560 + gate, up, down 2560x9728 each) = 2 * 36 * 100,925,440.
  EXPECT_NEAR(prefill_attention_cost_ratio(qwen3_4b()), 589824.0 / (2.0 * 36 * 100925440), 1e-12);
  EXPECT_EQ(prefill_attention_cost_ratio(ModelConfig{}), 0) << "no linear weights: no ratio, no division by zero";
}

TEST(PrefillCost, AChunkAfter100KCachedTokensIsSmallerThanAFreshOne) {
  const PrefillCost cost(prefill_attention_cost_ratio(qwen3_4b()));
  const double budget = cost.cost(8192, 0);
  EXPECT_EQ(cost.equal_cost_chunk(8192, 0), 8192);
  const int32_t at_50k = cost.equal_cost_chunk(8192, 50000);
  const int32_t at_100k = cost.equal_cost_chunk(8192, 100000);
  EXPECT_LT(at_50k, 8192);
  EXPECT_LT(at_100k, at_50k);
  // About 1/9 of the tokens: attention after 100K tokens costs ~8x the linear part.
  EXPECT_GT(at_100k, 1000);
  EXPECT_LT(at_100k, 1400);
  for (int32_t chunk : {at_50k, at_100k}) EXPECT_LE(cost.cost(chunk, chunk == at_50k ? 50000 : 100000), budget);
  EXPECT_GT(cost.cost(at_100k + 1, 100000), budget) << "the largest chunk within the budget";
  EXPECT_EQ(cost.equal_cost_chunk(1, 200000), 1) << "never 0 tokens";
  EXPECT_EQ(PrefillCost(0).equal_cost_chunk(8192, 100000), 8192) << "ratio 0: token count alone";
}

TEST(CostBasedChunking, LateChunksOfALongPromptShrinkWhileChatsDecodeEveryStep) {
  constexpr int32_t kBudget = 8192, kPromptLen = 110000, kNumChats = 4;
  SchedulerOptions options;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = kBudget;
  options.prefill_attention_cost_ratio = prefill_attention_cost_ratio(qwen3_4b());
  SchedulerHarness harness(fake_model(7200, 16, 115000), options, true);
  std::vector<Sequence*> chats;
  for (int32_t i = 0; i < kNumChats; ++i) chats.push_back(harness.add(numbered_prompt(7 * i, 12, 400)));
  harness.step();  // the chats' prompts
  Sequence* document = harness.add(numbered_prompt(1000, kPromptLen, 4));
  const PrefillCost cost(options.prefill_attention_cost_ratio);
  std::vector<int32_t> chunks;
  while (document->num_computed < kPromptLen) {
    std::vector<int32_t> outputs_before;
    for (const Sequence* chat : chats) outputs_before.push_back(chat->num_output_tokens());
    const int32_t cached = document->num_computed;
    harness.step();
    const int32_t chunk = document->num_computed - cached;
    ASSERT_GT(chunk, 0) << "the prompt makes progress every step";
    // The chats' decodes take kNumChats tokens of the step's budget; the chunk costs no more than a fresh prompt's
    // chunk of the rest would.
    EXPECT_LE(cost.cost(chunk, cached), cost.cost(kBudget - kNumChats, 0) * (1 + 1e-12)) << "after " << cached;
    for (size_t i = 0; i < chats.size(); ++i)
      EXPECT_EQ(chats[i]->num_output_tokens(), outputs_before[i] + 1) << "chat " << i << " decodes every step";
    chunks.push_back(chunk);
  }
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks.front(), kBudget - kNumChats) << "nothing cached: the token budget alone";
  EXPECT_LT(chunks[chunks.size() - 2], chunks.front() / 4) << "a chunk after ~100K cached tokens";
  EXPECT_TRUE(std::is_sorted(chunks.begin(), chunks.end() - 1, std::greater<>())) << "chunks shrink with context";
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(CostBasedChunking, AThresholdChunkShrinksToo) {
  SchedulerOptions options;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 4096;
  options.long_prefill_token_threshold = 1024;
  options.prefill_attention_cost_ratio = 1e-2;  // a steep ratio, so short contexts show the effect
  SchedulerHarness harness(fake_model(256, 16, 4000), options, true);
  Sequence* document = harness.add(numbered_prompt(0, 3000, 2));
  harness.step();
  EXPECT_EQ(document->num_computed, 1024) << "fresh: the threshold";
  harness.step();
  const PrefillCost cost(options.prefill_attention_cost_ratio);
  EXPECT_EQ(document->num_computed, 1024 + cost.equal_cost_chunk(1024, 1024));
  EXPECT_LT(document->num_computed, 2048);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(CostBasedChunking, RefusesANegativeOrNonFiniteRatio) {
  BlockManager blocks(64, 4, true);
  for (double ratio : {-1e-5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    SchedulerOptions options;
    options.max_model_len = 64;
    options.prefill_attention_cost_ratio = ratio;
    EXPECT_THROW(Scheduler(options, blocks), Error) << ratio;
  }
}

}  // namespace
}  // namespace qinfer::testing
