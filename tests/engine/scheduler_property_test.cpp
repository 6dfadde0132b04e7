// Random submit / step / abort operations against the scheduler over the fake backend. After every operation the
// block accounting must be exact; at the end every block must be free; every sequence that was not aborted must
// have generated exactly the reference tokens, however it was batched, chunked, cached or preempted.
#include <gtest/gtest.h>

#include <random>

#include "engine/request_validation.h"
#include "scheduler_harness.h"

namespace qinfer::testing {
namespace {

struct PropertyConfig {
  SchedulingPolicy policy;
  bool chunked;
  bool prefix_caching;
  uint64_t seed;
};

class SchedulerProperty : public ::testing::TestWithParam<PropertyConfig> {};

TEST_P(SchedulerProperty, RandomOperationsKeepInvariantsAndOutputs) {
  const PropertyConfig config = GetParam();
  FakeModelSpec spec;
  spec.vocab_size = 64;  // eos (0) ends about one sequence in 64 per token
  spec.num_blocks = 24;
  spec.block_size = 4;
  spec.max_model_len = 64;
  SchedulerOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = config.chunked ? 16 : 64;
  options.enable_chunked_prefill = config.chunked;
  options.policy = config.policy;
  SchedulerHarness harness(spec, options, config.prefix_caching);

  std::mt19937_64 rng(config.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Shared prefixes so that the prefix cache hits.
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> prefix;
    for (int i = 0, len = uniform(0, 20); i < len; ++i) prefix.push_back(uniform(1, 63));
    prefixes.push_back(prefix);
  }
  std::vector<Sequence*> aborted;
  constexpr int kOperations = 4000;
  for (int op = 0; op < kOperations; ++op) {
    int kind = uniform(0, 99);
    int live = harness.scheduler.num_running() + harness.scheduler.num_waiting();
    if (kind < 35 && live < 24) {
      std::vector<int32_t> prompt = prefixes[static_cast<size_t>(uniform(0, 3))];
      for (int i = 0, len = uniform(1, 12); i < len; ++i) prompt.push_back(uniform(1, 63));
      int32_t max_tokens = uniform(1, std::min(20, spec.max_model_len - static_cast<int32_t>(prompt.size())));
      int32_t n = uniform(1, 3);
      if (blocks_for_samples(static_cast<int64_t>(prompt.size()), static_cast<int64_t>(prompt.size()) + max_tokens, n,
                             spec.block_size) > spec.num_blocks)
        n = 1;
      SequenceSpec seq_spec;
      seq_spec.prompt = prompt;
      seq_spec.max_tokens = max_tokens;
      seq_spec.priority = uniform(-2, 2);
      seq_spec.ignore_eos = uniform(0, 3) == 0;
      if (uniform(0, 1) == 1) {
        seq_spec.sampling.temperature = 0.8f;
        seq_spec.sampling.seed = static_cast<uint64_t>(op);
      }
      Sequence* parent = harness.add(seq_spec);
      for (int32_t i = 1; i < n; ++i) {
        SequenceSpec child = seq_spec;
        child.sampling.seed += static_cast<uint64_t>(i);
        child.fork_parent = parent;
        harness.add(child);
      }
    } else if (kind < 90 || live == 0) {
      harness.step();
    } else {
      // Abort a random unfinished sequence, running or waiting.
      std::vector<Sequence*> candidates;
      for (const auto& seq : harness.sequences)
        if (!seq->finished()) candidates.push_back(seq.get());
      Sequence* victim = candidates[static_cast<size_t>(uniform(0, static_cast<int>(candidates.size()) - 1))];
      harness.scheduler.finish(victim, FinishReason::kAbort);
      aborted.push_back(victim);
      ASSERT_EQ(harness.check_invariants(), "");
    }
    if (::testing::Test::HasFailure()) FAIL() << "after operation " << op;
  }
  ASSERT_TRUE(harness.run_to_completion());
  EXPECT_EQ(harness.blocks.num_free_blocks(), spec.num_blocks);
  EXPECT_EQ(harness.blocks.check_consistency({}), "");
  size_t checked = 0;
  for (const auto& seq : harness.sequences) {
    if (seq->finish_reason == FinishReason::kAbort) continue;
    ++checked;
    ASSERT_EQ(std::vector<int32_t>(seq->output().begin(), seq->output().end()), harness.reference_output(*seq))
        << "sequence " << seq->id;
  }
  EXPECT_GT(checked, 200u);
  if (config.prefix_caching) {
    EXPECT_GT(harness.blocks.stats().prefix_hit_tokens, 0);
  }
  EXPECT_GT(harness.scheduler.stats().preemptions, 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, SchedulerProperty,
                         ::testing::Values(PropertyConfig{SchedulingPolicy::kFcfs, true, true, 1},
                                           PropertyConfig{SchedulingPolicy::kPriority, false, true, 2},
                                           PropertyConfig{SchedulingPolicy::kLpm, true, false, 3},
                                           PropertyConfig{SchedulingPolicy::kFcfs, false, false, 4}));

}  // namespace
}  // namespace qinfer::testing
