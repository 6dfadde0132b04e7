// Speculative verification on the CUDA backend: a sequence with sample_all_positions (k proposals, k + 1 positions
// scored in one step) batched with a decode and a prefill sequence. Its logits at every position must match the CPU
// reference and the same positions decoded one at a time on the GPU (within bf16's error, as CudaBackendParityTest);
// its tokens must be what the CPU backend's sampler draws from the GPU's own logits, position by position (each with
// its own Philox step and the output before it for the penalties), greedy and seeded; results come in batch order.
// The backend is built with fewer logit rows (max_num_seqs) than the larger verify steps sample, so those compute and
// sample their logits in chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/factory.h"
#include "backend/sampling.h"
#include "gpu_test_util.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"

namespace qinfer {
namespace {

constexpr int kPromptA = 40, kPromptB = 25, kPromptC = 30;

// The bf16 parity bounds of CudaBackendParityTest: relative logit error, and the top-2 margin above which argmaxes
// must agree.
constexpr double kLogitTolerance = 2e-2;
constexpr float kClearMargin = 0.05f;

double relative_error(std::span<const float> got, std::span<const float> want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(diff / norm);
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());  // lowest id among equals
}

float top2_margin(std::span<const float> row) {
  std::vector<float> sorted(row.begin(), row.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  return sorted[0] - sorted[1];
}

// Parameter: k, the proposals of the verified sequence.
class CudaVerifyStepTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 3, nullptr));
    BackendOptions o;
    o.max_model_len = 256;
    o.kv_cache_bytes = int64_t{64} << 20;
    o.max_num_seqs = 4;  // fewer logit rows than a verify step of k = 4 or 8 samples in this batch
    o.max_num_batched_tokens = 256;
    o.device = "cpu";
    cpu_ = create_backend(model_, o);
    o.device = "cuda";
    gpu_ = create_backend(model_, o);
    vocab_ = static_cast<size_t>(model_->config.vocab_size);
    prompt_a_ = testing::spread_prompt(kPromptA, 1);
    prompt_b_ = testing::spread_prompt(kPromptB, 2);
    prompt_c_ = testing::spread_prompt(kPromptC, 3);
    // A's output so far (two tokens from its prompt, so penalties see repeats), then the k proposals.
    output_a_ = {prompt_a_[3], prompt_a_[7]};
    for (int i = 0; i < k(); ++i) output_a_.push_back(prompt_a_[static_cast<size_t>(10 + 3 * i)]);
  }

  int k() const { return GetParam(); }

  // A and B prefilled (their K/V written) on `backend`.
  void prefill(Backend& backend) const {
    Batch batch;
    batch.token_ids = prompt_a_;
    batch.token_ids.insert(batch.token_ids.end(), prompt_b_.begin(), prompt_b_.end());
    batch.sequences = {testing::batch_sequence(kPromptA, 0, table_a_, &greedy_),
                       testing::batch_sequence(kPromptB, 0, table_b_, &greedy_)};
    backend.forward_logits(batch);
  }

  // B decodes one token, A verifies its k proposals (k + 1 positions: its last output token, then the proposals),
  // C's whole prompt is prefilled; each samples with the params given.
  Batch verify_batch(const SamplingParams* a, const SamplingParams* b, const SamplingParams* c) const {
    Batch batch;
    batch.token_ids = {4242};
    const std::span<const int32_t> a_tokens = std::span(output_a_).subspan(1);  // the last output token, proposals
    batch.token_ids.insert(batch.token_ids.end(), a_tokens.begin(), a_tokens.end());
    batch.token_ids.insert(batch.token_ids.end(), prompt_c_.begin(), prompt_c_.end());
    BatchSequence verify = testing::batch_sequence(k() + 1, kPromptA, table_a_, a);
    verify.sample_all_positions = true;
    verify.history = {prompt_a_, output_a_};
    verify.sample_step = 2;  // the first position produces output token 2 (two came before the proposals)
    BatchSequence decode = testing::batch_sequence(1, kPromptB, table_b_, b);
    decode.history = {prompt_b_, {}};
    BatchSequence prefill = testing::batch_sequence(kPromptC, 0, table_c_, c);
    prefill.history = {prompt_c_, {}};
    batch.sequences = {decode, verify, prefill};
    return batch;
  }

  // Rows of a verify batch's logits: B's, A's k + 1, C's.
  size_t num_rows() const { return static_cast<size_t>(k()) + 3; }
  std::span<const float> row(const std::vector<float>& logits, size_t r) const {
    return std::span(logits).subspan(r * vocab_, vocab_);
  }

  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> cpu_, gpu_;
  size_t vocab_ = 0;
  std::vector<int32_t> prompt_a_, prompt_b_, prompt_c_, output_a_;
  const std::vector<int32_t> table_a_ = {0, 1, 2, 3}, table_b_ = {4, 5}, table_c_ = {6, 7};
  SamplingParams greedy_{.temperature = 0};
};

TEST_P(CudaVerifyStepTest, GreedyMatchesCpuAndOneAtATime) {
  ASSERT_TRUE(gpu_->supports_multi_position_sampling());
  prefill(*cpu_);
  prefill(*gpu_);
  const Batch batch = verify_batch(&greedy_, &greedy_, &greedy_);
  ASSERT_EQ(batch.num_sampled(), static_cast<int32_t>(num_rows()));
  const std::vector<float> cpu = cpu_->forward_logits(batch), gpu = gpu_->forward_logits(batch);
  ASSERT_EQ(gpu.size(), num_rows() * vocab_);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t r = 0; r < num_rows(); ++r) {
    EXPECT_LT(relative_error(row(gpu, r), row(cpu, r)), kLogitTolerance) << "row " << r;
    if (top2_margin(row(cpu, r)) > kClearMargin) {
      EXPECT_EQ(argmax(row(gpu, r)), argmax(row(cpu, r))) << "row " << r;
    }
  }
  // step() writes the same K/V and computes the same logits: its tokens are their argmaxes, in batch order.
  const std::vector<SampleResult> tokens = gpu_->step(batch);
  ASSERT_EQ(tokens.size(), num_rows());
  for (size_t r = 0; r < num_rows(); ++r) EXPECT_EQ(tokens[r].token, argmax(row(gpu, r))) << "row " << r;

  // A's positions one at a time (single-sequence decode steps, a captured graph for step()), each after the one
  // before has rewritten its K/V.
  for (int i = 0; i <= k(); ++i) {
    Batch one;
    one.token_ids = {output_a_[static_cast<size_t>(1 + i)]};
    one.sequences = {testing::batch_sequence(1, kPromptA + i, table_a_, &greedy_)};
    const std::vector<float> alone = gpu_->forward_logits(one);
    const std::vector<SampleResult> stepped = gpu_->step(one);
    ASSERT_EQ(stepped.size(), 1u);
    const size_t r = 1 + static_cast<size_t>(i);
    EXPECT_LT(relative_error(row(gpu, r), alone), kLogitTolerance) << "position " << i;
    if (top2_margin(alone) > kClearMargin) {
      EXPECT_EQ(argmax(row(gpu, r)), argmax(alone)) << "position " << i;
      EXPECT_EQ(tokens[r].token, stepped[0].token) << "position " << i;
    }
  }
}

// Seeded top-k/top-p sampling with penalties, logit_bias and top logprobs at every position of A; B seeded without
// penalties, C greedy. Exact against the CPU sampler on the GPU's logits (the GPU sampler follows sample_token()
// step by step); and a wrong Philox step per position would change tokens, which the check must be able to see.
TEST_P(CudaVerifyStepTest, SeededSamplingDrawsPerPositionAsTheCpuSampler) {
  SamplingParams a{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f};
  a.repetition_penalty = 1.3f;
  a.presence_penalty = 0.4f;
  a.frequency_penalty = 0.2f;
  a.seed = 1234;
  a.num_top_logprobs = 3;
  SamplingParams b{.temperature = 0.7f};
  b.seed = 99;
  b.num_top_logprobs = 1;
  prefill(*gpu_);
  Batch batch = verify_batch(&a, &b, &greedy_);
  const std::vector<LogitBias> bias = {{output_a_.back(), 3.0f}, {17, -100.0f}};
  batch.sequences[1].logit_bias = bias;
  const std::vector<float> logits = gpu_->forward_logits(batch);
  const std::vector<SampleResult> got = gpu_->step(batch);
  std::vector<float> sampled_logits = logits;  // the CPU backend's sampling applies logit_bias in place
  const std::vector<SampleResult> want = sample_batch_on_host(batch, sampled_logits, model_->config.vocab_size);
  ASSERT_EQ(got.size(), num_rows());
  ASSERT_EQ(want.size(), num_rows());
  for (size_t r = 0; r < num_rows(); ++r) {
    EXPECT_EQ(got[r].token, want[r].token) << "row " << r;
    EXPECT_NEAR(got[r].logprob, want[r].logprob, 1e-4) << "row " << r;
    ASSERT_EQ(got[r].top.size(), want[r].top.size()) << "row " << r;
    for (size_t n = 0; n < want[r].top.size(); ++n) {
      EXPECT_EQ(got[r].top[n].token, want[r].top[n].token) << "row " << r << " top " << n;
      EXPECT_NEAR(got[r].top[n].logprob, want[r].top[n].logprob, 1e-4) << "row " << r << " top " << n;
    }
  }
  if (k() >= 4) {
    int differ = 0;  // positions after the first that the first position's step would draw differently
    for (int i = 1; i <= k(); ++i) {
      const std::span<const float> logits_i = row(logits, 1 + static_cast<size_t>(i));
      std::vector<float> x(logits_i.begin(), logits_i.end());
      apply_logit_constraints(x, {}, bias);
      const TokenHistory history{prompt_a_, std::span(output_a_).first(2 + static_cast<size_t>(i))};
      differ += sample_token(x, a, history, 2).token != want[1 + static_cast<size_t>(i)].token;
    }
    EXPECT_GT(differ, 0) << "the positions' draws do not depend on their step: the test cannot see a wrong one";
  }
}

INSTANTIATE_TEST_SUITE_P(Proposals, CudaVerifyStepTest, ::testing::Values(1, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "k" + std::to_string(info.param); });

}  // namespace
}  // namespace qinfer
