// The whole CUDA forward pass against the CPU reference backend on the tiny test models: logits of prefill, chunked
// prefill, cached-prefix chunks, mixed prefill + decode batches and greedy decode; with the bf16 KV cache (against the
// CPU's fp32 one) and with the fp8 cache (against the CPU's fp8 cache: the same format, dequantised when read).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>

#include "backend/backend.h"
#include "backend/cuda/kernels/decode_attention/plan.h"
#include "backend/factory.h"
#include "backend/sampling.h"
#include "gpu_test_util.h"
#include "model/quantization_config.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"

namespace qinfer {
namespace {

using cuda::testing::compare_row;
using cuda::testing::RowComparison;

std::vector<int32_t> concat(std::initializer_list<std::span<const int32_t>> parts) {
  std::vector<int32_t> all;
  for (std::span<const int32_t> part : parts)
    for (int32_t id : part) all.push_back(id);
  return all;
}

// A parity model: a test-model preset, with ":awq", ":gptq" or ":fp8" its linears quantized in that checkpoint format
// (groups of 64, which divide every k of the tiny presets).
ModelConfig parity_model_config(const std::string& spec) {
  const size_t colon = spec.find(':');
  ModelConfig config = test_model_preset(spec.substr(0, colon));
  const std::string format = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (format == "awq") config.quantization = awq_quantization(64);
  if (format == "gptq") config.quantization = gptq_quantization(64);
  if (format == "fp8") config.quantization = fp8_block_quantization();
  return config;
}

// Parameters: the parity model (parity_model_config) and the KV cache dtype.
class CudaBackendParityTest : public ::testing::TestWithParam<std::tuple<const char*, KvCacheDtype>> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = std::make_shared<LoadedModel>(make_dummy_model(parity_model_config(std::get<0>(GetParam())), 3, nullptr));
    BackendOptions o;
    o.kv_cache_dtype = std::get<1>(GetParam());
    o.max_model_len = 512;
    o.kv_cache_bytes = int64_t{64} << 20;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 512;
    o.device = "cpu";
    cpu_ = create_backend(model_, o);
    o.device = "cuda";
    gpu_ = create_backend(model_, o);
  }

  std::vector<int32_t> prompt(int n, int salt) const { return testing::spread_prompt(n, salt); }
  BatchSequence sequence(int num_tokens, int num_cached, std::span<const int32_t> table) const {
    return testing::batch_sequence(num_tokens, num_cached, table, &greedy_);
  }
  bool fp8() const { return std::get<1>(GetParam()) == KvCacheDtype::kFp8E4m3; }

  // The GPU and the CPU reference quantise K/V computed from bf16 and fp32 activations: where those differ by bf16's
  // rounding (about 2^-9), an element near an E4M3 rounding boundary lands one step (2^-4 to 2^-3 relative) apart, so
  // the fp8 comparison carries a few times bf16's error. Stated bounds: relative logit error 2e-2 (bf16), 6e-2 (fp8);
  // argmax agreement where the reference's top-2 margin exceeds 0.05 (bf16) or 0.5 (fp8, about twice the RMS logit
  // difference seen). Flips of that kind move about as many elements as far as quantising does (measured: the GPU's
  // fp8 logits sit about as far from the CPU's fp8 ones as from its fp32 ones), so the kernels' exactness is checked
  // where inputs are identical: the KV write against the host quantiser, decode attention against a reference over
  // the same quantised cache, the gather against fp8.h; here a broken path would show as O(1) errors.
  double tolerance() const { return fp8() ? 6e-2 : 2e-2; }
  float clear_margin() const { return fp8() ? 0.5f : 0.05f; }

  // Runs the batch on both backends and checks every sampled row.
  void expect_same_logits(const Batch& batch, const std::string& what) {
    const std::vector<float> cpu = cpu_->forward_logits(batch), gpu = gpu_->forward_logits(batch);
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
    for (size_t r = 0; r < cpu.size() / vocab; ++r) {
      const auto gpu_row = std::span(gpu).subspan(r * vocab, vocab);
      const RowComparison c = compare_row(gpu_row, std::span(cpu).subspan(r * vocab, vocab), clear_margin());
      EXPECT_LT(c.relative_error, tolerance()) << what << " row " << r;
      EXPECT_TRUE(c.argmax_agrees) << what << " row " << r;
    }
  }

  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> cpu_, gpu_;
  SamplingParams greedy_{.temperature = 0};
};

TEST_P(CudaBackendParityTest, PrefillChunksAndDecodeMatchCpu) {
  const auto a = prompt(70, 1), b = prompt(5, 2), c = prompt(130, 3);
  const std::vector<int32_t> table_a = {0, 1, 2, 3, 4, 5}, table_b = {6, 7},
                             table_c = {8, 9, 10, 11, 12, 13, 14, 15, 16};

  // Three prompts in one batch; a is split into chunks of 30 + 40 (the first chunk samples nothing).
  Batch first;
  first.token_ids = concat({std::span(a).first(30), b, c});
  first.sequences = {sequence(30, 0, table_a), sequence(5, 0, table_b), sequence(130, 0, table_c)};
  first.sequences[0].sample = false;
  expect_same_logits(first, "prefill");

  // Mixed batch: the rest of a as a chunk after its cached prefix, b and c decode one token each.
  Batch second;
  const std::vector<int32_t> decode_ids = {17, 4242};
  second.token_ids = concat({std::span(a).subspan(30), decode_ids});
  second.sequences = {sequence(40, 30, table_a), sequence(1, 5, table_b), sequence(1, 130, table_c)};
  expect_same_logits(second, "chunk + decode");

  // Greedy decode through step(): the GPU's tokens are fed back to both backends.
  int32_t next_a = 1, next_b = 2, next_c = 3;
  for (int i = 0; i < 6; ++i) {
    Batch decode;
    decode.token_ids = {next_a, next_b, next_c};
    decode.sequences = {sequence(1, 70 + i, table_a), sequence(1, 6 + i, table_b), sequence(1, 131 + i, table_c)};
    const std::vector<float> cpu = cpu_->forward_logits(decode);
    const std::vector<SampleResult> gpu = gpu_->step(decode);
    ASSERT_EQ(gpu.size(), 3u);
    const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
    for (size_t r = 0; r < 3; ++r) {
      std::span<const float> row = std::span(cpu).subspan(r * vocab, vocab);
      std::vector<float> sorted(row.begin(), row.end());
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const int32_t cpu_argmax = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      if (sorted[0] - sorted[1] > clear_margin()) {
        EXPECT_EQ(gpu[r].token, cpu_argmax) << "decode step " << i << " row " << r;
      }
    }
    next_a = gpu[0].token, next_b = gpu[1].token, next_c = gpu[2].token;
  }
}

// Decode steps of exactly two and exactly one token: every linear on the 2-row tensor-core GEMV, then on the 1-row
// GEMV, with the q/k norm, RoPE and KV write inside the register decode attention.
TEST_P(CudaBackendParityTest, TwoThenOneSequenceDecodeMatchCpu) {
  const auto a = prompt(21, 4), b = prompt(50, 5);
  const std::vector<int32_t> table_a = {0, 1, 2}, table_b = {3, 4, 5, 6};
  Batch prefill;
  prefill.token_ids = concat({a, b});
  prefill.sequences = {sequence(21, 0, table_a), sequence(50, 0, table_b)};
  expect_same_logits(prefill, "prefill of two");
  for (int i = 0; i < 3; ++i) {
    Batch two;
    two.token_ids = {300 + i, 700 + i};
    two.sequences = {sequence(1, 21 + i, table_a), sequence(1, 50 + i, table_b)};
    expect_same_logits(two, "decode of two, step " + std::to_string(i));
  }
  Batch one;
  one.token_ids = {900};
  one.sequences = {sequence(1, 24, table_a)};
  expect_same_logits(one, "decode of one");
}

// Six sequences decode in one batch: above the small-batch limit of the decode attention, so on Hopper the backend
// takes the bulk-copy kernel, whose tensor maps are bounded by the pool size. Their blocks are the last ones of the
// pool, where a wrong bound would read zeros instead of the cached K/V.
TEST_P(CudaBackendParityTest, SixSequencesDecodeFromThePoolEndMatchCpu) {
  const int block_size = gpu_->kv_cache().block_size;
  ASSERT_EQ(block_size, cpu_->kv_cache().block_size);
  int32_t next_block = static_cast<int32_t>(std::min(gpu_->kv_cache().num_blocks, cpu_->kv_cache().num_blocks)) - 1;
  const std::vector<int> lens = {17, 40, 5, 33, 64, 90};
  std::vector<std::vector<int32_t>> prompts, tables;
  for (size_t i = 0; i < lens.size(); ++i) {
    prompts.push_back(prompt(lens[i], 10 + static_cast<int>(i)));
    tables.emplace_back();
    for (int b = 0; b < lens[i] / block_size + 1; ++b) tables.back().push_back(next_block--);  // room for one more
  }
  Batch prefill, decode;
  for (size_t i = 0; i < lens.size(); ++i) {
    prefill.token_ids.insert(prefill.token_ids.end(), prompts[i].begin(), prompts[i].end());
    prefill.sequences.push_back(sequence(lens[i], 0, tables[i]));
    decode.token_ids.push_back(100 + static_cast<int32_t>(i));
    decode.sequences.push_back(sequence(1, lens[i], tables[i]));
  }
  expect_same_logits(prefill, "prefill of six");
  expect_same_logits(decode, "decode of six");
}

// Greedy decode with penalties through step(): one row with the caller's penalty list (as the engine keeps it), one
// without penalties, one whose list the plan walks from the history. Each step's tokens must be the argmax of the
// same step's GPU logits (forward_logits first; it writes the same K/V) after the penalties, wherever that argmax is
// not a near-tie: every step sends the rows' lists up again, so a list at the wrong offset or cut short shows as a
// token the penalties should have ruled out. To make sure they rule one out, each penalised row's unpenalised argmax
// joins its output history before the step. (Against the CPU's logits the comparison would need the bf16 margin,
// which the penalties' near-ties often fall under.)
TEST_P(CudaBackendParityTest, PenalisedDecodeTakesThePenalisedArgmax) {
  const auto a = prompt(40, 21), b = prompt(25, 22), c = prompt(33, 23);
  const std::vector<int32_t> table_a = {0, 1, 2, 3}, table_b = {4, 5, 6}, table_c = {7, 8, 9, 10};
  SamplingParams penalised{.temperature = 0};
  penalised.repetition_penalty = 1.8f;
  penalised.presence_penalty = 1.5f;
  penalised.frequency_penalty = 0.5f;
  Batch prefill;
  prefill.token_ids = concat({a, b, c});
  prefill.sequences = {sequence(40, 0, table_a), sequence(25, 0, table_b), sequence(33, 0, table_c)};
  gpu_->step(prefill);

  PenaltyTokens list_a(penalised, a);
  std::vector<int32_t> out_a = {a[3]}, out_b = {b[0]}, out_c = {c[5]};  // the first decode tokens repeat the prompts
  list_a.add_output(out_a[0]);
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
  // A row's logits after the penalties, as sample_token applies them.
  const auto penalise = [&](std::span<const float> row, std::span<const int32_t> prompt_ids,
                            std::span<const int32_t> output) {
    std::vector<float> x(row.begin(), row.end());
    std::vector<int> count(vocab, 0);
    std::vector<bool> seen(vocab, false);
    for (int32_t t : prompt_ids) seen[static_cast<size_t>(t)] = true;
    for (int32_t t : output) seen[static_cast<size_t>(t)] = true, ++count[static_cast<size_t>(t)];
    for (size_t t = 0; t < vocab; ++t) {
      if (seen[t]) x[t] = x[t] > 0 ? x[t] / penalised.repetition_penalty : x[t] * penalised.repetition_penalty;
      if (count[t] > 0) x[t] -= penalised.presence_penalty + penalised.frequency_penalty * static_cast<float>(count[t]);
    }
    return x;
  };
  int checked = 0, ruled_out = 0;
  for (int i = 0; i < 6; ++i) {
    Batch decode;
    decode.token_ids = {out_a.back(), out_b.back(), out_c.back()};
    decode.sequences = {sequence(1, 40 + i, table_a), sequence(1, 25 + i, table_b), sequence(1, 33 + i, table_c)};
    decode.sequences[0].sampling = decode.sequences[2].sampling = &penalised;
    const std::vector<float> logits = gpu_->forward_logits(decode);
    const auto row = [&](size_t r) { return std::span(logits).subspan(r * vocab, vocab); };
    const auto raw_argmax = [&](size_t r) {
      return static_cast<int32_t>(std::max_element(row(r).begin(), row(r).end()) - row(r).begin());
    };
    out_a.push_back(raw_argmax(0));
    list_a.add_output(out_a.back());
    out_c.push_back(raw_argmax(2));
    decode.sequences[0].history = {a, out_a};
    decode.sequences[0].penalty_tokens = &list_a;
    decode.sequences[2].history = {c, out_c};
    const std::vector<SampleResult> gpu = gpu_->step(decode);
    ASSERT_EQ(gpu.size(), 3u);
    const std::vector<std::vector<float>> want = {
        penalise(row(0), a, out_a), std::vector<float>(row(1).begin(), row(1).end()), penalise(row(2), c, out_c)};
    for (size_t r = 0; r < 3; ++r) {
      std::vector<float> sorted = want[r];
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const auto argmax = static_cast<int32_t>(std::max_element(want[r].begin(), want[r].end()) - want[r].begin());
      if (sorted[0] - sorted[1] > 1e-3f) {
        ++checked;
        ruled_out += raw_argmax(r) != argmax;
        EXPECT_EQ(gpu[r].token, argmax) << "decode step " << i << " row " << r;
      }
    }
    out_a.push_back(gpu[0].token);
    list_a.add_output(gpu[0].token);
    out_b.push_back(gpu[1].token);
    out_c.push_back(gpu[2].token);
  }
  EXPECT_GE(checked, 15) << "too few rows without a near-tie";
  EXPECT_GE(ruled_out, 6) << "the penalties seldom changed the argmax: the test would hardly see them missing";
}

TEST_P(CudaBackendParityTest, RejectsMalformedBatch) {
  const std::vector<int32_t> table = {0};
  Batch bad;
  bad.token_ids = {1, 2};
  bad.sequences = {sequence(3, 0, table)};
  EXPECT_THROW(gpu_->forward_logits(bad), Error);
}

TEST_P(CudaBackendParityTest, ReportsTheKvCacheDtype) { EXPECT_EQ(gpu_->kv_cache().dtype, std::get<1>(GetParam())); }

std::string parity_test_name(const ::testing::TestParamInfo<std::tuple<const char*, KvCacheDtype>>& info) {
  std::string name = std::get<0>(info.param);
  std::replace(name.begin(), name.end(), '-', '_');
  std::replace(name.begin(), name.end(), ':', '_');
  return name + (std::get<1>(info.param) == KvCacheDtype::kFp8E4m3 ? "_fp8" : "_bf16");
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaBackendParityTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny-untied"),
                                            ::testing::Values(KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3)),
                         parity_test_name);
// Quantized checkpoints: prefill rows on dequantized bf16 weights through cuBLASLt, decode rows on the quantized
// tensor-core GEMV, against the CPU reference on the same (exactly dequantized) weights.
INSTANTIATE_TEST_SUITE_P(QuantizedWeights, CudaBackendParityTest,
                         ::testing::Combine(::testing::Values("tiny:awq", "tiny-untied:awq", "tiny:gptq",
                                                              "tiny-untied:fp8", "tiny:fp8"),
                                            ::testing::Values(KvCacheDtype::kBf16)),
                         parity_test_name);

// Four sequences past the register kernel's context limit (decode_attention_register_context): their decode step runs
// a ring decode attention kernel (bulk copy on Hopper builds) with the 4-row linears on cuBLASLt, while each sequence
// alone stays on the register kernel and the 1-row GEMV. Both ways must give the same logits within bf16's error, and
// step() (a graph planned for the context's bucket) the same greedy tokens where the margin is clear.
class LongContextSmallBatchTest : public ::testing::TestWithParam<KvCacheDtype> {};

TEST_P(LongContextSmallBatchTest, FourSequencesMatchEachAlone) {
  SKIP_WITHOUT_GPU();
  const bool fp8 = GetParam() == KvCacheDtype::kFp8E4m3;
  const int context = fp8 ? 8300 : 2100;  // cached tokens before the decoded one
  ASSERT_GT(context, cuda::decode_attention_register_context(4, GetParam()));
  ASSERT_LE(context, cuda::decode_attention_register_context(1, GetParam()))
      << "each alone must stay on the register kernel";
  auto model = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 3, nullptr));
  BackendOptions o;
  o.kv_cache_dtype = GetParam();
  o.max_model_len = 16384;
  o.kv_cache_bytes = int64_t{256} << 20;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 8448;
  o.device = "cuda";
  const std::unique_ptr<Backend> gpu = create_backend(model, o);
  const int block_size = gpu->kv_cache().block_size, blocks = context / block_size + 2;
  const SamplingParams greedy{.temperature = 0};
  std::vector<std::vector<int32_t>> tables(4);
  const auto sequence = [&](int s, int num_tokens, int num_cached) {
    return testing::batch_sequence(num_tokens, num_cached, tables[static_cast<size_t>(s)], &greedy);
  };
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks; ++b) tables[static_cast<size_t>(s)].push_back(s * blocks + b);
    Batch prefill;
    prefill.token_ids = testing::spread_prompt(context, s);
    prefill.sequences = {sequence(s, context, 0)};
    gpu->forward_logits(prefill);
  }
  const auto decode_of = [&](std::initializer_list<int> members) {
    Batch batch;
    for (int s : members) {
      batch.token_ids.push_back(100 + s);
      batch.sequences.push_back(sequence(s, 1, context));
    }
    return batch;
  };
  const std::vector<float> together = gpu->forward_logits(decode_of({0, 1, 2, 3}));
  const std::vector<SampleResult> stepped = gpu->step(decode_of({0, 1, 2, 3}));
  ASSERT_EQ(stepped.size(), 4u);
  const size_t vocab = static_cast<size_t>(model->config.vocab_size);
  ASSERT_EQ(together.size(), 4 * vocab);
  for (int s = 0; s < 4; ++s) {
    const std::vector<float> alone = gpu->forward_logits(decode_of({s}));
    const auto row = std::span(together).subspan(static_cast<size_t>(s) * vocab, vocab);
    const RowComparison c = compare_row(row, alone, 0.05f);
    EXPECT_LT(c.relative_error, 2e-2) << "sequence " << s;
    EXPECT_TRUE(c.argmax_agrees) << "sequence " << s;
    std::vector<float> sorted(alone.begin(), alone.end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 0.05f) {
      EXPECT_EQ(stepped[static_cast<size_t>(s)].token, std::max_element(alone.begin(), alone.end()) - alone.begin())
          << "sequence " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LongContextSmallBatchTest,
                         ::testing::Values(KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3),
                         [](const ::testing::TestParamInfo<KvCacheDtype>& info) {
                           return std::string(info.param == KvCacheDtype::kFp8E4m3 ? "fp8" : "bf16");
                         });

}  // namespace
}  // namespace qinfer
