// CPU backend behaviour the engine relies on: batch invariance, chunked prefill, shared prefix blocks, validation.
#include <gtest/gtest.h>

#include <numeric>

#include "backend/backend.h"
#include "backend/factory.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"
#include "util/error.h"

namespace qinfer {
namespace {

class CpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny-untied"), 5, nullptr));
    BackendOptions o;
    o.device = "cpu";
    o.max_model_len = 512;
    o.kv_cache_bytes = int64_t{64} << 20;
    backend_ = create_backend(model_, o);
  }
  std::vector<int32_t> prompt(int n, int salt) { return testing::spread_prompt(n, salt); }
  BatchSequence sequence(int num_tokens, int num_cached, std::span<const int32_t> table) {
    return testing::batch_sequence(num_tokens, num_cached, table, &greedy_);
  }
  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> backend_;
  SamplingParams greedy_{.temperature = 0};
};

TEST_F(CpuBackendTest, BatchedLogitsEqualSoloLogitsBitForBit) {
  auto a = prompt(37, 1), b = prompt(5, 2);
  std::vector<int32_t> table_a = {0, 1, 2}, table_b = {3};
  Batch solo;
  solo.token_ids = a;
  solo.sequences = {sequence(37, 0, table_a)};
  std::vector<float> alone = backend_->forward_logits(solo);

  std::vector<int32_t> table_a2 = {4, 5, 6};
  Batch both;
  both.token_ids = b;
  both.token_ids.insert(both.token_ids.end(), a.begin(), a.end());
  both.sequences = {sequence(5, 0, table_b), sequence(37, 0, table_a2)};
  std::vector<float> batched = backend_->forward_logits(both);
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
  ASSERT_EQ(batched.size(), 2 * vocab);
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + static_cast<ptrdiff_t>(vocab)));
}

TEST_F(CpuBackendTest, ChunkedPrefillEqualsOneShotPrefill) {
  auto ids = prompt(50, 3);
  std::vector<int32_t> table1 = {0, 1, 2, 3}, table2 = {4, 5, 6, 7};
  Batch full;
  full.token_ids = ids;
  full.sequences = {sequence(50, 0, table1)};
  std::vector<float> expected = backend_->forward_logits(full);

  Batch chunk;
  chunk.token_ids.assign(ids.begin(), ids.begin() + 21);
  chunk.sequences = {sequence(21, 0, table2)};
  chunk.sequences[0].sample = false;
  EXPECT_TRUE(backend_->forward_logits(chunk).empty());
  chunk.token_ids.assign(ids.begin() + 21, ids.end());
  chunk.sequences = {sequence(29, 21, table2)};
  std::vector<float> got = backend_->forward_logits(chunk);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-4f) << i;
}

TEST_F(CpuBackendTest, SecondSequenceReusesCachedPrefixBlocks) {
  // Block size 16: the first 32 tokens fill blocks 0 and 1, which a second sequence shares read-only.
  auto ids = prompt(40, 4);
  std::vector<int32_t> table1 = {0, 1, 2};
  Batch first;
  first.token_ids = ids;
  first.sequences = {sequence(40, 0, table1)};
  std::vector<float> expected = backend_->forward_logits(first);
  std::vector<int32_t> table2 = {0, 1, 9};
  Batch second;
  second.token_ids.assign(ids.begin() + 32, ids.end());
  second.sequences = {sequence(8, 32, table2)};
  std::vector<float> got = backend_->forward_logits(second);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-4f) << i;
}

TEST_F(CpuBackendTest, MalformedBatchesAreRefusedWithAReason) {
  std::vector<int32_t> table = {0};
  Batch b;
  b.token_ids = {1, 2, 3};
  b.sequences = {sequence(2, 0, table)};
  EXPECT_THROW(backend_->step(b), Error);  // 3 ids for 2 tokens
  b.sequences = {sequence(3, 0, table)};
  b.token_ids = {1, 2, 999999};
  try {
    backend_->step(b);
    FAIL() << "out-of-vocabulary id accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("999999"), std::string::npos);
  }
  b.token_ids = {1, 2, 3};
  b.sequences = {sequence(3, 14, table)};  // 17 positions need 2 blocks
  EXPECT_THROW(backend_->step(b), Error);
  std::vector<int32_t> bad_block = {1 << 30};
  b.sequences = {sequence(3, 0, bad_block)};
  EXPECT_THROW(backend_->step(b), Error);
}

TEST_F(CpuBackendTest, StepSamplesOnlyForSamplingSequences) {
  auto ids = prompt(10, 5);
  std::vector<int32_t> t1 = {0}, t2 = {1};
  Batch b;
  b.token_ids = ids;
  b.token_ids.insert(b.token_ids.end(), ids.begin(), ids.end());
  b.sequences = {sequence(10, 0, t1), sequence(10, 0, t2)};
  b.sequences[0].sample = false;
  auto results = backend_->step(b);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_GE(results[0].token, 0);
}

TEST(CpuBackendOptions, RefusesContextBeyondTheModel) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 1, nullptr));
  BackendOptions o;
  o.device = "cpu";
  o.max_model_len = 1 << 20;
  EXPECT_THROW(create_backend(model, o), Error);
  o.max_model_len = 0;
  o.device = "tpu";
  EXPECT_THROW(create_backend(model, o), Error);
}

}  // namespace
}  // namespace qinfer
