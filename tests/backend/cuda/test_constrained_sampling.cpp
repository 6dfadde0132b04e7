// The GPU sampler with constraints against the host reference (apply_logit_constraints() then sample_token()): random
// logits, rows at different points of a real JSON-schema grammar over the Qwen3 vocabulary (so masks allow a few
// tokens or nearly all of them), logit_bias entries, and the sampling modes of test_sampling.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "backend/cuda/batch_plan.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/sampling.h"
#include "gpu_test_util.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;

TEST(GpuConstrainedSampling, MatchesHostReference) {
  SKIP_WITHOUT_GPU();
  const auto tokenizer_json = std::filesystem::path(QINFER_SOURCE_DIR) / ".assets/qwen3-tokenizer/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(tokenizer_json)) << "run tools/fetch-test-assets.sh";
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json);
  const int vocab = 151936;
  grammar::GrammarCompiler compiler(grammar::TokenVocabulary::from_tokenizer(tokenizer, vocab, {151645, 151643}));
  const auto compiled = compiler.compile({grammar::Constraint::Kind::kJsonSchema,
                                          R"({"type": "object", "properties": {"name": {"type": "string"},
                                              "n": {"type": "integer"}, "tag": {"enum": ["alpha", "beta"]}},
                                              "required": ["name", "n", "tag"]})",
                                          {}});
  // Row r's matcher has read the first r tokens of a document: inside the key, inside the free string, at an enum...
  const std::vector<int32_t> doc = tokenizer.encode(R"({"name": "Ada Lovelace", "n": 1815, "tag": "beta"})");
  std::vector<SamplingParams> modes(5);
  modes[1].temperature = 0.7f, modes[1].top_k = 20, modes[1].top_p = 0.8f;
  modes[2].temperature = 1.0f, modes[2].top_p = 0.9f;
  modes[3].temperature = 1.1f, modes[3].min_p = 0.02f, modes[3].num_top_logprobs = 5;
  modes[4].temperature = 0.0f, modes[4].num_top_logprobs = 3, modes[4].presence_penalty = 1.0f;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::vector<int32_t> block_table = {0};
  const int rows = static_cast<int>(doc.size()) + 1;
  for (const SamplingParams& mode : modes) {
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (auto& x : logits) x = std::round(normal(rng) * 8.0f) / 8.0f;
    std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(rows));
    std::vector<std::vector<LogitBias>> biases(static_cast<size_t>(rows));
    std::vector<int32_t> prompt = {1, 2, 3};
    Batch batch;
    for (int r = 0; r < rows; ++r) {
      grammar::GrammarMatcher m(compiled);
      for (int i = 0; i < r; ++i) ASSERT_TRUE(m.accept_token(doc[static_cast<size_t>(i)]));
      masks[static_cast<size_t>(r)].resize(static_cast<size_t>(compiled->vocab().mask_words()));
      m.fill_mask(masks[static_cast<size_t>(r)]);
      if (r % 3 == 1) biases[static_cast<size_t>(r)] = {{doc[0], 5.0f}, {100, -100.0f}, {151645, 2.5f}};
      BatchSequence s;
      s.num_tokens = 1;
      s.block_table = block_table;
      s.sample = true;
      s.sampling = &mode;
      s.history = {prompt, std::span<const int32_t>(doc.data(), static_cast<size_t>(r))};
      s.sample_step = static_cast<uint64_t>(r * 5 + 1);
      if (r % 4 != 3) s.allowed_tokens = masks[static_cast<size_t>(r)];  // every fourth row: bias alone or nothing
      s.logit_bias = biases[static_cast<size_t>(r)];
      batch.sequences.push_back(s);
      batch.token_ids.push_back(0);
    }
    const BatchPlan plan = plan_batch(batch, 16, vocab);
    ASSERT_TRUE(plan.constrained());
    std::vector<uint32_t> all_masks;
    for (auto mask : plan.masks) all_masks.insert(all_masks.end(), mask.begin(), mask.end());
    std::vector<DeviceLogitBias> all_biases;
    for (auto list : plan.biases)
      for (const LogitBias& b : list) all_biases.push_back({b.token, b.bias});
    if (all_biases.empty()) all_biases.push_back({});
    DeviceArray<float> dlogits(logits), work(logits.size()), probs(logits.size());
    DeviceArray<DeviceSamplingParams> dparams(plan.sampling_params);
    std::vector<PenaltyEntry> penalties = penalty_entries(plan);
    if (penalties.empty()) penalties.push_back({});
    DeviceArray<PenaltyEntry> dpenalties(penalties);
    DeviceArray<uint32_t> dmasks(all_masks);
    DeviceArray<DeviceLogitBias> dbiases(all_biases);
    DeviceArray<SampledToken> results(static_cast<size_t>(rows));
    DeviceArray<LogitsChunkStats> stats(static_cast<size_t>(rows * sampling_chunks(vocab)));
    SamplingKernelParams p{dlogits.get(), work.get(), probs.get(), dparams.get(), dpenalties.get(),
                           results.get(), rows,       vocab,       stats.get()};
    p.constrained = true;
    p.masks = dmasks.get();
    p.biases = dbiases.get();
    launch_sampling(p, test_stream());
    const auto got = results.download();
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row(logits.begin() + static_cast<ptrdiff_t>(r) * vocab,
                             logits.begin() + static_cast<ptrdiff_t>(r + 1) * vocab);
      const BatchSequence& s = batch.sequences[static_cast<size_t>(r)];
      apply_logit_constraints(row, s.allowed_tokens, s.logit_bias);
      const SampleResult want = sample_token(row, mode, s.history, s.sample_step);
      EXPECT_EQ(got[static_cast<size_t>(r)].token, want.token) << "row " << r;
      EXPECT_NEAR(got[static_cast<size_t>(r)].logprob, want.logprob, 1e-4) << "row " << r;
      if (!s.allowed_tokens.empty()) {
        EXPECT_TRUE(s.allowed_tokens[static_cast<size_t>(want.token) / 32] >> (want.token % 32) & 1u) << "row " << r;
      }
      for (size_t n = 0; n < want.top.size(); ++n)
        EXPECT_EQ(got[static_cast<size_t>(r)].top_tokens[n], want.top[n].token) << "row " << r << " top " << n;
    }
  }
}

}  // namespace
}  // namespace qinfer::cuda
