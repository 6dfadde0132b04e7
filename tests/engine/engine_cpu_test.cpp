// Batch invariance on the CPU backend with the generated tiny model: every request's output from the engine —
// batched with others, with or without prefix-cache hits, chunked prefill and forced preemption — must equal what a
// plain loop produces running that request alone (whole-prompt prefill, then one decode step per token). Each case
// runs with the fp32 reference KV cache and with the fp8 (E4M3) one.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>

#include "backend/backend.h"
#include "backend/factory.h"
#include "engine/engine.h"
#include "model/test_model.h"
#include "testing/engine_run.h"

namespace qinfer {
namespace {

constexpr int kBlockSize = 16;
constexpr int kMaxModelLen = 96;
constexpr int kMaxTokens = 12;

std::shared_ptr<const LoadedModel> tiny_model() {
  static const auto model =
      std::make_shared<const LoadedModel>(make_dummy_model(test_model_preset("tiny"), 7, nullptr));
  return model;
}

std::unique_ptr<Backend> cpu_backend(KvCacheDtype dtype, int64_t kv_cache_bytes = 0) {
  BackendOptions options;
  options.kv_cache_dtype = dtype;
  options.device = "cpu";
  options.block_size = kBlockSize;
  options.max_model_len = kMaxModelLen;
  options.max_num_seqs = 8;
  options.num_threads = 2;
  options.kv_cache_bytes = kv_cache_bytes;
  return create_backend(tiny_model(), options);
}

// Prompts sharing a 20-token prefix (prefix-cache hits) with different tails; one sampled with a seed.
std::vector<GenerationRequest> requests() {
  std::vector<GenerationRequest> result;
  std::vector<int32_t> shared(20);
  std::iota(shared.begin(), shared.end(), 1000);
  for (int i = 0; i < 6; ++i) {
    GenerationRequest request;
    request.prompt = i % 2 == 0 ? shared : std::vector<int32_t>{};
    for (int t = 0; t < 5 + 7 * i; ++t) request.prompt.push_back(50 + 31 * i + 17 * t);
    request.sampling.temperature = i == 3 ? 0.8f : 0.0f;
    request.seed = 1234;
    request.max_tokens = kMaxTokens;
    request.ignore_eos = true;
    result.push_back(request);
  }
  return result;
}

// The request alone, without the engine: whole prompt in one step, then one token per step.
std::vector<int32_t> solo_reference(Backend& backend, const GenerationRequest& request) {
  std::vector<int32_t> table((kMaxModelLen + kBlockSize - 1) / kBlockSize);
  std::iota(table.begin(), table.end(), 0);
  SamplingParams params = request.sampling;
  params.seed = *request.seed;
  std::vector<int32_t> tokens = request.prompt;
  std::vector<int32_t> output;
  int32_t num_cached = 0;
  while (static_cast<int32_t>(output.size()) < *request.max_tokens) {
    Batch batch;
    batch.token_ids.assign(tokens.begin() + num_cached, tokens.end());
    BatchSequence seq;
    seq.num_cached = num_cached;
    seq.num_tokens = static_cast<int32_t>(tokens.size()) - num_cached;
    seq.block_table = table;
    seq.sample = true;
    seq.sampling = &params;
    seq.history = TokenHistory{request.prompt, output};
    seq.sample_step = output.size();
    batch.sequences.push_back(seq);
    int32_t token = backend.step(batch).at(0).token;
    num_cached = static_cast<int32_t>(tokens.size());
    tokens.push_back(token);
    output.push_back(token);
  }
  return output;
}

std::vector<std::vector<int32_t>> engine_outputs(Backend& backend, EngineOptions options, EngineStats* stats) {
  Engine engine(backend, std::move(options));
  std::vector<std::vector<int32_t>> outputs;
  for (const std::vector<StreamDelta>& deltas : run_to_completion(engine, requests())) {
    std::vector<int32_t> tokens;
    for (const StreamDelta& delta : deltas) tokens.insert(tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
    outputs.push_back(tokens);
  }
  *stats = engine.stats();
  EXPECT_EQ(stats->num_free_blocks, stats->num_blocks);
  return outputs;
}

// The solo reference of each KV cache dtype, computed once.
const std::vector<std::vector<int32_t>>& solo_outputs(KvCacheDtype dtype) {
  static std::map<KvCacheDtype, std::vector<std::vector<int32_t>>> cache;
  auto [it, inserted] = cache.try_emplace(dtype);
  if (inserted) {
    auto backend = cpu_backend(dtype);
    for (const GenerationRequest& request : requests()) it->second.push_back(solo_reference(*backend, request));
  }
  return it->second;
}

class EngineCpu : public ::testing::TestWithParam<KvCacheDtype> {
 protected:
  std::unique_ptr<Backend> make_backend(int64_t kv_cache_bytes = 0) { return cpu_backend(GetParam(), kv_cache_bytes); }
  const std::vector<std::vector<int32_t>>& expected() { return solo_outputs(GetParam()); }
};

TEST_P(EngineCpu, BatchedWithPrefixCachingAndChunkedPrefillMatchesSolo) {
  auto backend = make_backend();
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 24;  // prompts of up to 60 tokens go in chunks next to decodes
  EngineStats stats;
  EXPECT_EQ(engine_outputs(*backend, options, &stats), expected());
  EXPECT_GT(stats.blocks.prefix_hit_tokens, 0);
  EXPECT_GT(stats.scheduler.scheduled_sequences, stats.scheduler.steps);  // really batched
}

TEST_P(EngineCpu, NoPrefixCachingNoChunkingMatchesSolo) {
  auto backend = make_backend();
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = kMaxModelLen;
  options.enable_prefix_caching = false;
  options.enable_chunked_prefill = false;
  EngineStats stats;
  EXPECT_EQ(engine_outputs(*backend, options, &stats), expected());
  EXPECT_EQ(stats.blocks.prefix_hit_tokens, 0);
}

TEST_P(EngineCpu, ForcedPreemptionMatchesSolo) {
  auto probe = make_backend();
  int64_t bytes_per_block = probe->kv_cache().bytes / probe->kv_cache().num_blocks;
  probe.reset();
  auto backend = make_backend(8 * bytes_per_block);  // 8 blocks of 16 tokens for six sequences of up to 72 tokens
  ASSERT_EQ(backend->kv_cache().num_blocks, 8);
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 32;
  EngineStats stats;
  EXPECT_EQ(engine_outputs(*backend, options, &stats), expected());
  EXPECT_GT(stats.scheduler.preemptions, 0u);
}

INSTANTIATE_TEST_SUITE_P(KvCacheDtypes, EngineCpu, ::testing::Values(KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3),
                         [](const ::testing::TestParamInfo<KvCacheDtype>& info) {
                           return info.param == KvCacheDtype::kFp8E4m3 ? "Fp8" : "Bf16";
                         });

}  // namespace
}  // namespace qinfer
