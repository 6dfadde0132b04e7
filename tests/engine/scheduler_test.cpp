#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

#include "scheduler_harness.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

std::vector<int32_t> tokens_from(int32_t first, int32_t count) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

// Greedy unless changed; eos ignored when `ignore_eos`.
SequenceSpec seq_spec(std::vector<int32_t> prompt, int32_t max_tokens, bool ignore_eos = false, int32_t priority = 0) {
  SequenceSpec spec;
  spec.prompt = std::move(prompt);
  spec.max_tokens = max_tokens;
  spec.ignore_eos = ignore_eos;
  spec.priority = priority;
  return spec;
}

SchedulerOptions options(int32_t max_num_seqs, int32_t max_num_batched_tokens, bool chunked = true,
                         SchedulingPolicy policy = SchedulingPolicy::kFcfs) {
  SchedulerOptions result;
  result.max_num_seqs = max_num_seqs;
  result.max_num_batched_tokens = max_num_batched_tokens;
  result.enable_chunked_prefill = chunked;
  result.policy = policy;
  return result;
}

TEST(Scheduler, DecodesComeFirstAndPrefillChunksFillTheBudget) {
  SchedulerHarness harness(fake_model(), options(8, 16), true);
  harness.add(seq_spec(tokens_from(1, 3), 40, true, 0));
  harness.add(seq_spec(tokens_from(5, 3), 40, true, 0));
  harness.step();  // both prompts (6 tokens)
  Sequence* long_prompt = harness.add(seq_spec(tokens_from(100, 40), 4, true, 0));
  harness.step();
  // Two decodes (1 token each) first, then a 14-token chunk of the long prompt.
  EXPECT_EQ(harness.last_batch_order, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(harness.last_batch_tokens, 16u);
  EXPECT_EQ(long_prompt->num_computed, 14);
  harness.step();
  EXPECT_EQ(long_prompt->num_computed, 28);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, WithoutChunkingAPromptWaitsForABudgetItFitsWhole) {
  SchedulerHarness harness(fake_model(), options(8, 128, false), true);
  for (int i = 0; i < 5; ++i) harness.add(seq_spec(tokens_from(10 * i + 1, 30), 8));
  harness.step();
  EXPECT_EQ(harness.last_batch_order.size(), 4u);  // 4 x 30 tokens fit 128; the fifth waits whole
  EXPECT_EQ(harness.scheduler.num_waiting(), 1);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, MaxNumSeqsBoundsTheRunningSet) {
  SchedulerHarness harness(fake_model(), options(3, 64), true);
  for (int i = 0; i < 7; ++i) harness.add(seq_spec(tokens_from(i + 1, 5), 6));
  harness.step();
  EXPECT_EQ(harness.scheduler.num_running(), 3);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, PreemptsByRecomputeWhenBlocksRunOutAndStillMatchesTheReference) {
  // 12 blocks of 4 tokens: four sequences growing to 40 tokens cannot all stay resident.
  SchedulerHarness harness(fake_model(12, 4, 48), options(4, 64), true);
  for (int i = 0; i < 4; ++i) harness.add(seq_spec(tokens_from(20 * i + 1, 8), 32, true, 0));
  EXPECT_TRUE(harness.run_to_completion());
  EXPECT_GT(harness.scheduler.stats().preemptions, 0u);
  expect_reference_outputs(harness);
  EXPECT_EQ(harness.blocks.num_free_blocks(), 12);
}

TEST(Scheduler, PriorityPolicyAdmitsLowerValuesFirst) {
  SchedulerHarness harness(fake_model(), options(1, 64, true, SchedulingPolicy::kPriority), true);
  Sequence* low = harness.add(seq_spec(tokens_from(1, 4), 2, true, 5));
  Sequence* high = harness.add(seq_spec(tokens_from(9, 4), 2, true, -1));
  harness.step();
  EXPECT_EQ(high->status, SequenceStatus::kRunning);
  EXPECT_EQ(low->status, SequenceStatus::kWaiting);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, PriorityPreemptsRunningSequencesOfWorsePriority) {
  SchedulerHarness harness(fake_model(), options(1, 64, true, SchedulingPolicy::kPriority), true);
  Sequence* low = harness.add(seq_spec(tokens_from(1, 4), 12, true, 5));
  harness.step();
  harness.step();
  ASSERT_EQ(low->status, SequenceStatus::kRunning);
  Sequence* same = harness.add(seq_spec(tokens_from(30, 4), 2, true, 5));
  harness.step();
  EXPECT_EQ(low->status, SequenceStatus::kRunning);  // equal priority waits its turn
  EXPECT_EQ(same->status, SequenceStatus::kWaiting);
  Sequence* high = harness.add(seq_spec(tokens_from(60, 4), 2, true, -1));
  harness.step();
  EXPECT_EQ(high->status, SequenceStatus::kRunning);
  EXPECT_EQ(low->status, SequenceStatus::kWaiting);
  EXPECT_EQ(low->num_preemptions, 1);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);  // the preempted sequence recomputes to the same tokens
}

TEST(Scheduler, LpmServesTheLongestCachedPrefixFirst) {
  SchedulerHarness harness(fake_model(), options(1, 64, true, SchedulingPolicy::kLpm), true);
  harness.add(seq_spec(tokens_from(1, 17), 1));
  EXPECT_TRUE(harness.run_to_completion());
  Sequence* unrelated = harness.add(seq_spec(tokens_from(300, 17), 1));
  Sequence* cached = harness.add(seq_spec(tokens_from(1, 20), 1));
  harness.step();
  EXPECT_TRUE(cached->finished() || cached->status == SequenceStatus::kRunning);
  EXPECT_EQ(unrelated->status, SequenceStatus::kWaiting);
  EXPECT_EQ(cached->num_cached_prompt_tokens, 16);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, SameStepSharedPrefixIsComputedOnce) {
  // Two requests with one 40-token prompt (two full blocks of 16) arrive together: the second waits one step, then maps
  // the first one's two blocks instead of computing them in the same step.
  SchedulerHarness harness(fake_model(64, 16), options(8, 256), true);
  Sequence* first = harness.add(seq_spec(tokens_from(1, 40), 3, true));
  Sequence* second = harness.add(seq_spec(tokens_from(1, 40), 3, true));
  Sequence* other = harness.add(seq_spec(tokens_from(200, 40), 3, true));
  harness.step();
  EXPECT_EQ(first->status, SequenceStatus::kRunning);
  EXPECT_EQ(second->status, SequenceStatus::kWaiting);
  EXPECT_EQ(other->status, SequenceStatus::kRunning);  // unrelated prompts are not held back
  EXPECT_TRUE(harness.run_to_completion());
  EXPECT_EQ(first->num_cached_prompt_tokens, 0);
  EXPECT_EQ(second->num_cached_prompt_tokens, 32);
  expect_reference_outputs(harness);
}

TEST(Scheduler, SameStepSharedPrefixWithoutPrefixCachingRunsAtOnce) {
  SchedulerHarness harness(fake_model(64, 16), options(8, 256), false);
  Sequence* first = harness.add(seq_spec(tokens_from(1, 40), 3, true));
  Sequence* second = harness.add(seq_spec(tokens_from(1, 40), 3, true));
  harness.step();
  EXPECT_EQ(first->status, SequenceStatus::kRunning);
  EXPECT_EQ(second->status, SequenceStatus::kRunning);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(Scheduler, StopConditions) {
  FakeModelSpec spec = fake_model();
  spec.vocab_size = 8;  // eos (0) comes up often
  SchedulerHarness harness(spec, options(8, 64), true);
  Sequence* stops_on_eos = harness.add(seq_spec(tokens_from(1, 5), 50));
  Sequence* ignores_eos = harness.add(seq_spec(tokens_from(1, 5), 50, true, 0));
  SequenceSpec with_stop_id = seq_spec(tokens_from(2, 5), 50, true);
  with_stop_id.stop_token_ids = {3};
  Sequence* stop_id = harness.add(with_stop_id);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
  EXPECT_EQ(stops_on_eos->output().back(), 0);
  EXPECT_EQ(stops_on_eos->finish_reason, FinishReason::kStop);
  EXPECT_EQ(ignores_eos->num_output_tokens(), 50);
  EXPECT_EQ(ignores_eos->finish_reason, FinishReason::kLength);
  EXPECT_EQ(stop_id->output().back(), 3);
}

TEST(Scheduler, FinishFreesBlocksAtOnce) {
  SchedulerHarness harness(fake_model(), options(8, 64), true);
  Sequence* seq = harness.add(seq_spec(tokens_from(1, 30), 50));
  harness.step();
  EXPECT_GT(harness.blocks.num_free_blocks(), 0);
  EXPECT_LT(harness.blocks.num_free_blocks(), 64);
  harness.scheduler.finish(seq, FinishReason::kAbort);
  EXPECT_EQ(harness.blocks.num_free_blocks(), 64);
  EXPECT_FALSE(harness.scheduler.has_work());
}

TEST(Scheduler, ForkedSamplesSharePromptBlocks) {
  SchedulerHarness harness(fake_model(), options(8, 64), /*enable_prefix_caching=*/false);
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  sampled.seed = 7;
  SequenceSpec parent_spec = seq_spec(tokens_from(1, 18), 6, true);
  parent_spec.sampling = sampled;
  Sequence* parent = harness.add(parent_spec);
  std::vector<Sequence*> children;
  for (uint64_t i = 1; i < 4; ++i) {
    SequenceSpec child_spec = parent_spec;
    child_spec.sampling.seed = 7 + i;
    child_spec.fork_parent = parent;
    children.push_back(harness.add(child_spec));
  }
  harness.step();  // the parent's prompt only: children wait for it
  EXPECT_EQ(harness.scheduler.num_running(), 1);
  harness.step();  // children map the parent's 4 full prompt blocks and compute 2 tokens each
  for (Sequence* child : children) {
    EXPECT_EQ(child->num_cached_prompt_tokens, 16);
    for (int b = 0; b < 4; ++b) EXPECT_EQ(child->block_table[b], parent->block_table[b]);
  }
  EXPECT_EQ(harness.blocks.num_free_blocks(), 64 - 4 - 4 * 1);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
  // Different seeds: the samples differ (the reference check above already pins each one).
  EXPECT_NE(std::vector<int32_t>(parent->output().begin(), parent->output().end()),
            std::vector<int32_t>(children[0]->output().begin(), children[0]->output().end()));
}

TEST(Scheduler, RejectsNonPositiveLimits) {
  FakeModelSpec spec = fake_model();
  BlockManager blocks(spec.num_blocks, spec.block_size, true);
  SchedulerOptions bad = options(0, 64);
  bad.max_model_len = 64;
  EXPECT_THROW(Scheduler(bad, blocks), Error);
  EXPECT_THROW(parse_scheduling_policy("sjf"), Error);
  EXPECT_EQ(parse_scheduling_policy("lpm"), SchedulingPolicy::kLpm);
}

}  // namespace
}  // namespace qinfer::testing
