// Tensor parallelism on the CPU: the weight shards, and the sharded forward against the unsharded CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/tensor_parallel_cpu_backend.h"
#include "backend/factory.h"
#include "model/online_quantization.h"
#include "model/tensor_shard.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"
#include "util/error.h"

namespace qinfer {
namespace {

// tiny-untied with 4 KV heads (so N = 4 divides them) and a vocabulary no N > 1 divides (padded vocabulary rows).
ModelConfig four_kv_head_config() {
  ModelConfig c = test_model_preset("tiny-untied");
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.hidden_size = 128;
  c.vocab_size = 151001;
  return c;
}

TEST(TensorShard, SlicesHaveTheRanksShapes) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny-untied"), 3, nullptr));
  const ModelConfig& c = model->config;  // hidden 192, intermediate 512, 6 heads, 2 KV heads, head_dim 64
  const ShardSpec spec = shard_spec(c, 1, 2);
  EXPECT_EQ(spec.num_heads, 3);
  EXPECT_EQ(spec.num_kv_heads, 1);
  EXPECT_EQ(spec.intermediate_size, 256);
  EXPECT_EQ(spec.vocab_rows, 75968);
  const LoadedModel shard = shard_weights(model, spec);
  EXPECT_EQ(shard.config.q_width(), 192);
  EXPECT_EQ(shard.config.kv_width(), 64);
  EXPECT_EQ(shard.config.vocab_size, c.vocab_size);
  const Qwen3LayerWeights& l = shard.weights.layers[1];
  const auto shape = [](const LinearWeight& w) { return std::vector<int64_t>{w.out_features, w.in_features}; };
  EXPECT_EQ(shape(l.q_proj), (std::vector<int64_t>{192, 192}));
  EXPECT_EQ(shape(l.k_proj), (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(shape(l.v_proj), (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(shape(l.o_proj), (std::vector<int64_t>{192, 192}));
  EXPECT_EQ(shape(l.gate_proj), (std::vector<int64_t>{256, 192}));
  EXPECT_EQ(shape(l.down_proj), (std::vector<int64_t>{192, 256}));
  EXPECT_EQ(l.o_proj.dense().shape, (std::vector<int64_t>{192, 192}));
  EXPECT_EQ(shard.weights.embed_tokens.shape, (std::vector<int64_t>{75968, 192}));
  EXPECT_EQ(shard.weights.lm_head.shape, (std::vector<int64_t>{75968, 192}));

  // Rank 1's o_proj column j is the model's column 192 + j; its k_proj row i the model's row 64 + i.
  const auto element = [](const TensorView& t, int64_t r, int64_t col) {
    return reinterpret_cast<const uint16_t*>(t.data)[r * t.shape[1] + col];
  };
  const Qwen3LayerWeights& full = model->weights.layers[1];
  for (int64_t r : {0, 7, 191})
    for (int64_t j : {0, 100, 191})
      EXPECT_EQ(element(l.o_proj.dense(), r, j), element(full.o_proj.dense(), r, 192 + j));
  EXPECT_EQ(element(l.k_proj.dense(), 5, 9), element(full.k_proj.dense(), 69, 9));
  EXPECT_EQ(element(l.down_proj.dense(), 3, 255), element(full.down_proj.dense(), 3, 511));
}

TEST(TensorShard, PaddedVocabularyRowsAreZero) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(four_kv_head_config(), 3, nullptr));
  const ShardSpec spec = shard_spec(model->config, 3, 4);  // rows [113253, 151004): the last 3 are padding
  ASSERT_EQ(spec.vocab_rows, 37751);
  const LoadedModel shard = shard_weights(model, spec);
  const TensorView& e = shard.weights.embed_tokens;
  const auto* bits = reinterpret_cast<const uint16_t*>(e.data);
  const int64_t h = e.shape[1], real_rows = 151001 - spec.vocab_begin();
  EXPECT_TRUE(std::all_of(bits + real_rows * h, bits + e.shape[0] * h, [](uint16_t b) { return b == 0; }));
  EXPECT_EQ(bits[(real_rows - 1) * h],
            reinterpret_cast<const uint16_t*>(model->weights.embed_tokens.data)[(151001 - 1) * h]);
}

TEST(TensorShard, SizesThatDoNotDivideAreRefusedNamingTheNumbers) {
  const auto message = [](const ModelConfig& c, int size) {
    try {
      check_tensor_parallel_size(c, size);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string();
  };
  const ModelConfig tiny = test_model_preset("tiny-untied");  // 6 heads, 2 KV heads, intermediate 512
  EXPECT_EQ(message(tiny, 1), "");
  EXPECT_EQ(message(tiny, 2), "");
  EXPECT_NE(message(tiny, 3).find("--tensor-parallel-size 3 does not divide the model's num_key_value_heads 2"),
            std::string::npos);
  EXPECT_NE(message(tiny, 4).find("num_key_value_heads 2"), std::string::npos);
  EXPECT_NE(message(tiny, 0).find("--tensor-parallel-size 0: must be at least 1"), std::string::npos);
  EXPECT_NE(message(tiny, -2).find("must be at least 1"), std::string::npos);
  ModelConfig odd_mlp = four_kv_head_config();
  odd_mlp.intermediate_size = 510;
  EXPECT_NE(message(odd_mlp, 4).find("intermediate_size 510"), std::string::npos);
}

// CPU options for the small test models: 2 worker threads, a KV pool of `kv_mib` MiB per rank.
BackendOptions cpu_options(int max_model_len, int64_t kv_mib, int tensor_parallel_size = 1) {
  BackendOptions o;
  o.device = "cpu";
  o.max_model_len = max_model_len;
  o.kv_cache_bytes = kv_mib << 20;
  o.num_threads = 2;
  o.tensor_parallel_size = tensor_parallel_size;
  return o;
}

// The error create_backend throws for `model` split `size` ways; kInternal without a message when it accepts.
Error backend_error(std::shared_ptr<const LoadedModel> model, int size) {
  try {
    create_backend(std::move(model), cpu_options(64, 4, size));
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorKind::kInternal, "");
}

// The unsharded CPU reference and a TensorParallelCpuBackend over the same model and options.
struct BackendPair {
  std::unique_ptr<Backend> reference, sharded;
};

BackendPair make_pair(const ModelConfig& config, int size) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(config, 11, nullptr));
  BackendOptions o = cpu_options(256, 32);
  BackendPair pair;
  pair.reference = create_backend(model, o);
  o.tensor_parallel_size = size;
  pair.sharded = std::make_unique<TensorParallelCpuBackend>(model, o);
  return pair;
}

// max |a - b| over max |a|. Sharded and unsharded logits differ by about 5e-7 of their scale (fp32 sums in another
// order); the bound leaves a factor 20.
double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  return diff / scale;
}

void expect_sharded_equals_reference(const ModelConfig& config, int size) {
  BackendPair pair = make_pair(config, size);
  // The KV budget is per rank and a rank's block holds 1/N of the heads: N times the blocks (floor-rounded).
  EXPECT_GE(pair.sharded->kv_cache().num_blocks, (pair.reference->kv_cache().num_blocks * size * 99) / 100);
  const SamplingParams greedy{.temperature = 0};
  // Two prompts in one batch (one a prefill chunk that samples nothing), then greedy decode steps on both.
  std::vector<int32_t> a = testing::spread_prompt(37, 1), b = testing::spread_prompt(20, 2);
  const std::vector<int32_t> table_a = {0, 1, 2, 3}, table_b = {4, 5, 6};
  Batch prefill;
  prefill.token_ids = a;
  prefill.token_ids.insert(prefill.token_ids.end(), b.begin(), b.begin() + 12);
  prefill.sequences = {testing::batch_sequence(37, 0, table_a, &greedy),
                       testing::batch_sequence(12, 0, table_b, nullptr)};
  const std::vector<float> reference_logits = pair.reference->forward_logits(prefill);
  const std::vector<float> sharded_logits = pair.sharded->forward_logits(prefill);
  ASSERT_EQ(sharded_logits.size(), reference_logits.size());
  EXPECT_LE(relative_max_diff(reference_logits, sharded_logits), 1e-5) << "prefill, N = " << size;

  std::vector<int32_t> next_a = {a.back()}, next_b(b.begin() + 12, b.end());
  int32_t cached_a = 36, cached_b = 12;
  for (int step = 0; step < 6; ++step) {
    Batch decode;
    decode.token_ids = next_a;
    decode.token_ids.insert(decode.token_ids.end(), next_b.begin(), next_b.end());
    decode.sequences = {testing::batch_sequence(1, cached_a, table_a, &greedy),
                        testing::batch_sequence(static_cast<int32_t>(next_b.size()), cached_b, table_b, &greedy)};
    const std::vector<SampleResult> expected = pair.reference->step(decode);
    const std::vector<SampleResult> got = pair.sharded->step(decode);
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(got[i].token, expected[i].token) << "step " << step << ", sequence " << i << ", N = " << size;
    cached_a += 1;
    cached_b += static_cast<int32_t>(next_b.size());
    next_a = {expected[0].token};
    next_b = {expected[1].token};
  }
  // The caches hold the same history: the logits of one more decode agree as tightly as the prefill's.
  Batch last;
  last.token_ids = next_a;
  last.sequences = {testing::batch_sequence(1, cached_a, table_a, &greedy)};
  EXPECT_LE(relative_max_diff(pair.reference->forward_logits(last), pair.sharded->forward_logits(last)), 1e-5);
}

TEST(TensorParallelCpuBackend, OneRankEqualsTheReference) { expect_sharded_equals_reference(four_kv_head_config(), 1); }
TEST(TensorParallelCpuBackend, TwoRanksEqualTheReference) { expect_sharded_equals_reference(four_kv_head_config(), 2); }
TEST(TensorParallelCpuBackend, FourRanksEqualTheReference) {
  expect_sharded_equals_reference(four_kv_head_config(), 4);
}
TEST(TensorParallelCpuBackend, TwoRanksOfATiedModelEqualTheReference) {
  ModelConfig tied = four_kv_head_config();
  tied.tie_word_embeddings = true;
  expect_sharded_equals_reference(tied, 2);
}

TEST(TensorParallelCpuBackend, EachRankCachesItsOwnKvHeads) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(four_kv_head_config(), 11, nullptr));
  CpuBackend reference(model, cpu_options(64, 4));
  TensorParallelCpuBackend sharded(model, cpu_options(64, 4, 2));
  EXPECT_EQ(sharded.rank(1).config().num_kv_heads, 2);
  const std::vector<int32_t> table = {0};
  Batch batch;
  batch.token_ids = testing::spread_prompt(5, 3);
  batch.sequences = {testing::batch_sequence(5, 0, table, nullptr)};
  reference.forward_logits(batch);
  sharded.forward_logits(batch);
  // Layer 0's K and V come straight from the embedding, so they are bit-identical: rank 1's KV head h is the model's
  // KV head 2 + h.
  const int d = model->config.head_dim;
  for (auto part : {CpuKvCache::Part::kKey, CpuKvCache::Part::kValue})
    for (int h = 0; h < 2; ++h) {
      const float* got = sharded.rank(1).stored_kv_cache().fp32_vector(0, part, 0, 4, h);
      const float* expected = reference.stored_kv_cache().fp32_vector(0, part, 0, 4, 2 + h);
      EXPECT_TRUE(std::equal(got, got + d, expected)) << "KV head " << h;
    }
}

TEST(TensorParallelCpuBackend, FactoryRefusesSizesThatDoNotDivide) {
  auto model = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 1, nullptr));
  const Error error = backend_error(model, 2);  // tiny has one KV head
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(error.what()).find("num_key_value_heads 1"), std::string::npos) << error.what();
  EXPECT_EQ(create_backend(model, cpu_options(64, 4))->name(), "cpu");
}

TEST(TensorParallelCpuBackend, QuantizedLinearsAreRefused) {
  const LoadedModel dense = make_dummy_model(four_kv_head_config(), 1, nullptr);
  const Error error = backend_error(std::make_shared<LoadedModel>(quantize_fp8_on_load(dense, nullptr)), 2);
  EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(error.what()).find("dense (bf16/f16/f32) weights only"), std::string::npos) << error.what();
}

TEST(TensorParallelCpuBackend, MalformedBatchIsRefusedWithoutEndingTheGroup) {
  BackendPair pair = make_pair(four_kv_head_config(), 2);
  const SamplingParams greedy{.temperature = 0};
  const std::vector<int32_t> table = {0};
  Batch bad;
  bad.token_ids = {151001};  // outside the vocabulary
  bad.sequences = {testing::batch_sequence(1, 0, table, &greedy)};
  EXPECT_THROW(pair.sharded->step(bad), Error);
  EXPECT_EQ(pair.sharded->failure(), "");
  bad.token_ids = {7};
  EXPECT_EQ(pair.sharded->step(bad).size(), 1u);
}

}  // namespace
}  // namespace qinfer
