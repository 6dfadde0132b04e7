// Steps of equal chunks replayed as captured CUDA graphs: the planner pads a step whose sequences compute the same
// number of positions, sampling all of them (speculative verification) or each sequence's last (a draft model catching
// up), into a graph shape, and the replay must give what the eager step gives. One and two
// sequences pad to themselves (the same kernels over the same rows: exactly equal); three pad to four, whose dummy
// sequence only adds rows (equal within bf16 rounding). Each shape runs twice at different contexts, so the second
// step replays the graph the first captured, with the new step's metadata.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/step_plan.h"
#include "backend/factory.h"
#include "gpu_test_util.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"

namespace qinfer {
namespace {

constexpr int kPrompt = 40, kBlocksPerSequence = 6, kBlockSize = 16;

// Parameter: positions per sequence (k + 1).
class CudaVerifyGraphTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 5, nullptr));
    BackendOptions o;
    o.max_model_len = kBlocksPerSequence * kBlockSize;
    o.kv_cache_bytes = int64_t{64} << 20;
    o.max_num_seqs = 64;
    o.max_num_batched_tokens = 256;
    o.device = "cuda";
    graphed_ = create_backend(model_, o);
    o.cuda_graphs = false;
    eager_ = create_backend(model_, o);
    for (int s = 0; s < 3; ++s) {
      prompts_.push_back(testing::spread_prompt(kPrompt, 10 + s));
      std::vector<int32_t> table;
      for (int b = 0; b < kBlocksPerSequence; ++b) table.push_back(s * kBlocksPerSequence + b);
      tables_.push_back(table);
    }
  }

  int positions() const { return GetParam(); }
  // Steps of 1-3 sequences, each computing positions() tokens and sampling all of them or its last, against eager.
  void check_replay(bool all_positions);

  void prefill(Backend& backend) const {
    Batch batch;
    for (const auto& prompt : prompts_) batch.token_ids.insert(batch.token_ids.end(), prompt.begin(), prompt.end());
    for (int s = 0; s < 3; ++s) batch.sequences.push_back(testing::batch_sequence(kPrompt, 0, tables_[s], &greedy_));
    backend.forward_logits(batch);
  }

  // The first `sequences` sequences verify positions() tokens each after `cached` tokens: their prompt's tokens from
  // `cached` on stand in for the last output token and the proposals.
  Batch verify_batch(int sequences, int cached, const SamplingParams* sampling, bool all_positions = true) {
    Batch batch;
    for (int s = 0; s < sequences; ++s) {
      const auto& prompt = prompts_[static_cast<size_t>(s)];
      outputs_[s].assign(prompt.begin() + cached - kPrompt / 2, prompt.begin() + cached - kPrompt / 2 + positions());
      for (int i = 0; i < positions(); ++i) batch.token_ids.push_back(outputs_[s][static_cast<size_t>(i)]);
      BatchSequence verify = testing::batch_sequence(positions(), cached, tables_[s], sampling);
      verify.sample_all_positions = all_positions;
      verify.history = {prompt, outputs_[s]};
      verify.sample_step = 1;
      batch.sequences.push_back(verify);
    }
    return batch;
  }

  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> graphed_, eager_;
  std::vector<std::vector<int32_t>> prompts_, tables_;
  std::vector<int32_t> outputs_[3];
  SamplingParams greedy_{.temperature = 0};
};

TEST_P(CudaVerifyGraphTest, ReplayGivesTheEagerStep) { check_replay(true); }
TEST_P(CudaVerifyGraphTest, LastRowChunksReplayGiveTheEagerStep) { check_replay(false); }

void CudaVerifyGraphTest::check_replay(bool all_positions) {
  SamplingParams seeded{.temperature = 0.8f, .top_k = 50};
  seeded.seed = 7;
  seeded.num_top_logprobs = 2;
  prefill(*graphed_);
  prefill(*eager_);
  for (int sequences : {1, 2, 3}) {
    for (int cached : {kPrompt - 8, kPrompt - 3}) {  // the second replays the first's graph (same context bucket)
      for (const SamplingParams* sampling : {&greedy_, &seeded}) {
        const Batch batch = verify_batch(sequences, cached, sampling, all_positions);
        const std::vector<SampleResult> want = eager_->step(batch), got = graphed_->step(batch);
        ASSERT_EQ(got.size(), static_cast<size_t>(all_positions ? sequences * positions() : sequences));
        ASSERT_EQ(want.size(), got.size());
        const bool padded = cuda::padded_batch_size(sequences) != sequences;
        const std::string where = std::to_string(sequences) + " sequences after " + std::to_string(cached);
        for (size_t r = 0; r < got.size(); ++r) {
          EXPECT_EQ(got[r].token, want[r].token) << where << ", row " << r;
          if (padded)
            EXPECT_NEAR(got[r].logprob, want[r].logprob, 2e-2) << where << ", row " << r;
          else
            EXPECT_EQ(got[r].logprob, want[r].logprob) << where << ", row " << r;
          ASSERT_EQ(got[r].top.size(), want[r].top.size());
        }
      }
    }
  }
}

// The planner takes the graph path for these steps, and not for a step whose sequences score different counts.
TEST_P(CudaVerifyGraphTest, PlannerGraphsUniformVerifySteps) {
  const KvCacheShape kv = graphed_->kv_cache();
  const cuda::StepLimits limits{.max_num_seqs = 64, .max_num_batched_tokens = 256, .max_model_len = 96};
  cuda::StepPlanner planner(
      model_->config, kv, /*scratch_block=*/kv.num_blocks - 1, 0, limits,
      cuda::DeviceBuffer(static_cast<size_t>(cuda::block_table_bytes(limits, kv.block_size)), "block tables"));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const cuda::StepPlan& plan = planner.plan(verify_batch(3, kPrompt - 8, &greedy_), true, stream);
  EXPECT_TRUE(plan.graph);
  EXPECT_EQ(plan.graph_key.padded_sequences, 4);
  EXPECT_EQ(plan.graph_key.positions_per_sequence, positions());
  EXPECT_TRUE(plan.graph_key.all_positions_sampled);
  EXPECT_EQ(plan.host.num_tokens, 4 * positions());
  EXPECT_EQ(plan.num_requested_samples, 3 * positions());
  Batch mixed = verify_batch(2, kPrompt - 8, &greedy_);
  mixed.token_ids.pop_back();
  --mixed.sequences[1].num_tokens;
  outputs_[1].pop_back();
  mixed.sequences[1].history = {prompts_[1], outputs_[1]};
  EXPECT_FALSE(planner.plan(mixed, true, stream).graph);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Positions, CudaVerifyGraphTest, ::testing::Values(2, 5, 9),
                         [](const ::testing::TestParamInfo<int>& info) { return "p" + std::to_string(info.param); });

}  // namespace
}  // namespace qinfer
