// The CPU backend's fp8 KV cache: what it stores is the host quantiser's output for the fp32 K/V the reference path
// computes, and the logits it produces stay close to the fp32 cache's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "model/test_model.h"
#include "util/fp8.h"

namespace qinfer {
namespace {

constexpr int kPromptTokens = 45;

std::unique_ptr<CpuBackend> make_cpu_backend(std::shared_ptr<const LoadedModel> model, KvCacheDtype dtype) {
  BackendOptions options;
  options.device = "cpu";
  options.max_model_len = 256;
  options.kv_cache_bytes = int64_t{16} << 20;
  options.num_threads = 2;
  options.kv_cache_dtype = dtype;
  return std::make_unique<CpuBackend>(std::move(model), options);
}

class CpuFp8KvCache : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_shared<const LoadedModel>(make_dummy_model(test_model_preset("tiny-untied"), 11, nullptr));
    for (int i = 0; i < kPromptTokens; ++i) prompt_.push_back((i * 7919 + 104729) % 151000);
    table_ = {5, 2, 7};  // out of order: the test reads through the same table
    fp32_ = make_cpu_backend(model_, KvCacheDtype::kBf16);
    fp8_ = make_cpu_backend(model_, KvCacheDtype::kFp8E4m3);
    fp32_logits_ = fp32_->forward_logits(batch());
    fp8_logits_ = fp8_->forward_logits(batch());
  }
  Batch batch() {
    Batch b;
    b.token_ids = prompt_;
    BatchSequence s;
    s.num_tokens = kPromptTokens;
    s.block_table = table_;
    s.sample = true;
    s.sampling = &greedy_;
    b.sequences = {s};
    return b;
  }

  std::shared_ptr<const LoadedModel> model_;
  std::vector<int32_t> prompt_, table_;
  SamplingParams greedy_{.temperature = 0};
  std::unique_ptr<CpuBackend> fp32_, fp8_;
  std::vector<float> fp32_logits_, fp8_logits_;
};

TEST_F(CpuFp8KvCache, ReportsDtypeAndHoldsMoreBlocksInTheSameBytes) {
  EXPECT_EQ(fp8_->kv_cache().dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(fp32_->kv_cache().dtype, KvCacheDtype::kBf16);
  const int head_dim = model_->config.head_dim;
  // fp32 stores 4 bytes per element, fp8 one byte plus a 4-byte scale per head_dim elements.
  EXPECT_EQ(fp8_->kv_cache().bytes / fp8_->kv_cache().num_blocks * 4 * head_dim,
            fp32_->kv_cache().bytes / fp32_->kv_cache().num_blocks * (head_dim + 4));
}

// Layer 0's K and V do not depend on attention, so both backends computed the same fp32 vectors: the fp8 cache must
// hold exactly quantize_fp8_e4m3_vector of what the fp32 cache holds, for every token and KV head.
TEST_F(CpuFp8KvCache, StoredBytesAndScalesAreTheHostQuantiserOfTheFp32Vectors) {
  const ModelConfig& c = model_->config;
  const int block_size = fp32_->kv_cache().block_size;
  std::vector<uint8_t> expected(static_cast<size_t>(c.head_dim));
  int nonzero_scales = 0;
  for (auto part : {CpuKvCache::Part::kKey, CpuKvCache::Part::kValue}) {
    for (int pos = 0; pos < kPromptTokens; ++pos) {
      const int64_t block = table_[static_cast<size_t>(pos / block_size)];
      const int offset = pos % block_size;
      for (int head = 0; head < c.num_kv_heads; ++head) {
        const float* fp32 = fp32_->stored_kv_cache().fp32_vector(0, part, block, offset, head);
        const float scale = quantize_fp8_e4m3_vector(std::span(fp32, static_cast<size_t>(c.head_dim)), expected.data());
        const CpuKvCache::Fp8Vector stored = fp8_->stored_kv_cache().fp8_vector(0, part, block, offset, head);
        ASSERT_EQ(stored.scale, scale) << "position " << pos << " head " << head;
        ASSERT_TRUE(std::equal(expected.begin(), expected.end(), stored.bytes.begin()))
            << "position " << pos << " head " << head;
        nonzero_scales += scale > 0;
      }
    }
  }
  EXPECT_EQ(nonzero_scales, 2 * kPromptTokens * c.num_kv_heads);
}

// E4M3 keeps 3 mantissa bits: each stored element carries a rounding error of up to 2^-4 of its magnitude (RMS about
// 3.6 % for errors spread evenly over the step), so scores, attention outputs and in the end the logits move by a few
// percent of their spread. Bound: the RMS logit difference stays under 10 % of the fp32 logits' standard deviation,
// the greedy token is the same, and the two caches do differ.
TEST_F(CpuFp8KvCache, LogitsStayWithinBoundOfTheFp32Cache) {
  ASSERT_EQ(fp8_logits_.size(), fp32_logits_.size());
  const double n = static_cast<double>(fp32_logits_.size());
  const double mean = std::accumulate(fp32_logits_.begin(), fp32_logits_.end(), 0.0) / n;
  double variance = 0, squared_difference = 0;
  for (size_t i = 0; i < fp32_logits_.size(); ++i) {
    const double difference = static_cast<double>(fp8_logits_[i]) - fp32_logits_[i];
    variance += (fp32_logits_[i] - mean) * (fp32_logits_[i] - mean) / n;
    squared_difference += difference * difference / n;
  }
  const double deviation = std::sqrt(variance), rms_difference = std::sqrt(squared_difference);
  EXPECT_GT(rms_difference, 0.0);
  EXPECT_LT(rms_difference, 0.1 * deviation) << "RMS |fp8 - fp32| " << rms_difference << ", logit std " << deviation;
  EXPECT_EQ(std::max_element(fp8_logits_.begin(), fp8_logits_.end()) - fp8_logits_.begin(),
            std::max_element(fp32_logits_.begin(), fp32_logits_.end()) - fp32_logits_.begin());
}

}  // namespace
}  // namespace qinfer
