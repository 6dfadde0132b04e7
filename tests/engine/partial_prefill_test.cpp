// The partial-prefill limits of the scheduler (long_prefill_token_threshold, max_num_partial_prefills,
// max_long_partial_prefills): chunk caps, slots per step, short prompts passing a long one, and the outputs unchanged.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/scheduler.h"
#include "scheduler_harness.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

SequenceSpec prompt_of(int32_t first, int32_t count, int32_t max_tokens = 4) {
  SequenceSpec spec;
  spec.prompt.resize(static_cast<size_t>(count));
  std::iota(spec.prompt.begin(), spec.prompt.end(), first);
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

SchedulerOptions limits(int32_t threshold, int32_t partial, int32_t long_partial, int32_t budget = 64) {
  SchedulerOptions options;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = budget;
  options.long_prefill_token_threshold = threshold;
  options.max_num_partial_prefills = partial;
  options.max_long_partial_prefills = long_partial;
  return options;
}

TEST(PartialPrefill, ALongPromptsChunksStayWithinTheThreshold) {
  SchedulerHarness harness(fake_model(256, 4, 256), limits(10, 0, 0), true);
  Sequence* chat = harness.add(prompt_of(1, 3, 30));
  harness.step();
  Sequence* document = harness.add(prompt_of(100, 45));
  for (int step = 1; step <= 4; ++step) {
    harness.step();
    EXPECT_EQ(document->num_computed, 10 * step) << "step " << step;
    EXPECT_EQ(harness.last_batch_tokens, 11u) << "the chat's decode and one 10-token chunk";
  }
  harness.step();  // the last 5 prompt tokens are not long: one chunk
  EXPECT_EQ(document->num_computed, 45);
  EXPECT_FALSE(chat->finished());
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(PartialPrefill, ShortPromptsPassALongOneWhenItHoldsTheOnlyLongSlot) {
  SchedulerHarness harness(fake_model(256, 4, 256), limits(16, 3, 1), true);
  Sequence* first_long = harness.add(prompt_of(100, 60));
  Sequence* second_long = harness.add(prompt_of(200, 60));
  Sequence* short_a = harness.add(prompt_of(300, 8));
  Sequence* short_b = harness.add(prompt_of(400, 8));
  Sequence* short_c = harness.add(prompt_of(500, 8));
  harness.step();
  // Three slots: the first long prompt (16 tokens), the second waits for the long slot, two short prompts whole.
  EXPECT_EQ(first_long->num_computed, 16);
  EXPECT_EQ(second_long->num_computed, 0);
  EXPECT_EQ(short_a->num_computed, 8);
  EXPECT_EQ(short_b->num_computed, 8);
  EXPECT_EQ(short_c->num_computed, 0) << "no slot left";
  harness.step();
  EXPECT_EQ(short_c->num_computed, 8) << "the short prompts decode now: their slots are free";
  EXPECT_EQ(second_long->num_computed, 0) << "the long slot is still taken";
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(PartialPrefill, NoLimitsKeepsEveryPromptInOneStep) {
  SchedulerHarness harness(fake_model(256, 4, 256), limits(0, 0, 0, 128), true);
  for (int i = 0; i < 6; ++i) harness.add(prompt_of(10 * i + 1, 20));
  harness.step();
  EXPECT_EQ(harness.last_batch_order.size(), 6u);
  EXPECT_EQ(harness.last_batch_tokens, 120u);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(PartialPrefill, RefusesInconsistentLimits) {
  FakeModelSpec spec = fake_model(256, 4, 256);
  BlockManager blocks(spec.num_blocks, spec.block_size, true);
  SchedulerOptions negative = limits(-1, 0, 0);
  negative.max_model_len = 64;
  EXPECT_THROW(Scheduler(negative, blocks), Error);
  SchedulerOptions more_long_than_all = limits(8, 2, 3);
  more_long_than_all.max_model_len = 64;
  EXPECT_THROW(Scheduler(more_long_than_all, blocks), Error);
}

}  // namespace
}  // namespace qinfer::testing
