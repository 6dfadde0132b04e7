// Speculative decoding with n-gram proposals on the CPU backend and the generated tiny model: every request must give
// exactly the tokens, logprobs, finish reasons and usage it gives without speculation (greedy, seeded sampling,
// penalties, stop ids, stop strings, max_tokens), while proposals do get accepted on periodic prompts; the KV blocks
// reserved for proposals go back when they are rejected. Also the proposer and the adaptation rule on their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "backend/backend.h"
#include "backend/factory.h"
#include "engine/engine.h"
#include "engine/ngram_proposer.h"
#include "engine/scheduler.h"
#include "model/test_model.h"
#include "testing/fake_backend.h"

namespace qinfer {
namespace {

constexpr int kBlockSize = 16;
constexpr int kMaxModelLen = 160;

std::shared_ptr<const LoadedModel> tiny_model() {
  static const auto model =
      std::make_shared<const LoadedModel>(make_dummy_model(test_model_preset("tiny"), 7, nullptr));
  return model;
}

std::unique_ptr<Backend> cpu_backend(KvCacheDtype kv_cache_dtype = KvCacheDtype::kBf16) {
  BackendOptions options;
  options.kv_cache_dtype = kv_cache_dtype;
  options.device = "cpu";
  options.block_size = kBlockSize;
  options.max_model_len = kMaxModelLen;
  options.max_num_seqs = 8;
  options.num_threads = 2;
  return create_backend(tiny_model(), options);
}

SpeculativeConfig ngram(int32_t k) {
  SpeculativeConfig config;
  config.method = SpeculativeMethod::kNgram;
  config.num_speculative_tokens = k;
  config.prompt_lookup_min = 1;
  config.prompt_lookup_max = 4;
  return config;
}

// "<id>" per token, so that stop strings can be placed on token boundaries.
class IdTextDecoder final : public TextDecoder {
 public:
  std::string push(int32_t token) override { return "<" + std::to_string(token) + ">"; }
  std::string flush() override { return ""; }
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int32_t completion_tokens = 0;
  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Outcome& o) {
  out << "{finish " << finish_reason_name(o.finish) << ", " << o.completion_tokens << " tokens:";
  for (int32_t t : o.tokens) out << ' ' << t;
  return out << '}';
}

struct EngineRun {
  std::vector<Outcome> outcomes;
  EngineStats stats;
};

EngineRun run(Backend& backend, const std::vector<GenerationRequest>& requests, SpeculativeConfig speculation,
              int32_t max_num_batched_tokens = 64) {
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = max_num_batched_tokens;
  options.speculation = speculation;
  options.make_text_decoder = [] { return std::make_unique<IdTextDecoder>(); };
  Engine engine(backend, options);
  std::vector<RequestHandle> handles;
  for (const GenerationRequest& request : requests) handles.push_back(engine.submit(request));
  while (engine.step() || engine.has_work()) {
  }
  EngineRun result;
  for (RequestHandle& handle : handles) {
    std::vector<StreamDelta> deltas;
    while (handle.stream->wait_drain(deltas, std::chrono::milliseconds(0))) {
    }
    // One outcome per sample; the usage is the request's (summed over its samples).
    std::vector<Outcome> samples;
    for (const StreamDelta& delta : deltas) {
      if (samples.size() <= static_cast<size_t>(delta.index)) samples.resize(static_cast<size_t>(delta.index) + 1);
      Outcome& outcome = samples[static_cast<size_t>(delta.index)];
      outcome.tokens.insert(outcome.tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
      for (const TokenLogprobs& lp : delta.logprobs) outcome.logprobs.push_back(lp.logprob);
      outcome.text += delta.text;
      if (delta.finish_reason != FinishReason::kNone) outcome.finish = delta.finish_reason;
    }
    for (Outcome& outcome : samples) {
      outcome.completion_tokens = handle.stream->usage().completion_tokens;
      result.outcomes.push_back(outcome);
    }
  }
  result.stats = engine.stats();
  EXPECT_EQ(result.stats.num_free_blocks, result.stats.num_blocks);
  return result;
}

// A prompt of `periods` repeats of a `period`-token pattern, then a short tail.
std::vector<int32_t> periodic_prompt(int32_t period, int32_t periods, int32_t offset) {
  std::vector<int32_t> prompt;
  for (int32_t p = 0; p < periods; ++p)
    for (int32_t i = 0; i < period; ++i) prompt.push_back(offset + 37 * i);
  prompt.push_back(offset + 5);
  return prompt;
}

GenerationRequest request(std::vector<int32_t> prompt, int32_t max_tokens, float temperature = 0.0f) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.seed = 4321;
  r.ignore_eos = true;
  r.logprobs = true;
  return r;
}

// Greedy, seeded sampling (with top-k/top-p and penalties), a plain prompt and n = 2 samples on a cached prefix; all
// at once.
std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> requests;
  requests.push_back(request(periodic_prompt(5, 6, 100), 40));
  requests.push_back(request(periodic_prompt(3, 8, 900), 33));
  GenerationRequest sampled = request(periodic_prompt(4, 6, 2000), 40, 0.7f);
  sampled.sampling.top_k = 20;
  sampled.sampling.top_p = 0.9f;
  requests.push_back(sampled);
  GenerationRequest penalized = request(periodic_prompt(6, 4, 3000), 36, 0.0f);
  penalized.sampling.repetition_penalty = 1.2f;
  penalized.sampling.presence_penalty = 0.3f;
  penalized.sampling.frequency_penalty = 0.2f;
  requests.push_back(penalized);
  std::vector<int32_t> plain(23);
  std::iota(plain.begin(), plain.end(), 5000);
  requests.push_back(request(plain, 30, 1.0f));
  // Two seeded samples forking one prompt, which shares its first 30 tokens (two blocks) with the first request.
  GenerationRequest forked = request(periodic_prompt(5, 6, 100), 28, 0.9f);
  forked.prompt.insert(forked.prompt.end(), {7, 8, 9});
  forked.n = 2;
  requests.push_back(forked);
  return requests;
}

TEST(SpeculativeDecoding, OutputsEqualDecodingWithoutSpeculation) {
  auto backend = cpu_backend();
  const std::vector<GenerationRequest> requests = mixed_requests();
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{});
  for (int32_t k : {1, 4, 16}) {
    const EngineRun speculative = run(*backend, requests, ngram(k));
    EXPECT_EQ(speculative.outcomes, plain.outcomes) << "k = " << k;
    const SpeculationStats& spec = speculative.stats.scheduler.speculation;
    EXPECT_GT(spec.accepted_tokens, 0u) << "k = " << k;
    EXPECT_LE(spec.accepted_tokens, spec.draft_tokens);
    EXPECT_LT(speculative.stats.scheduler.steps, plain.stats.scheduler.steps) << "k = " << k;
    EXPECT_GT(speculative.stats.blocks.prefix_hit_tokens, 0) << "k = " << k;
  }
  EXPECT_EQ(plain.stats.scheduler.speculation.draft_tokens, 0u);
}

// Rejected positions of the fp8 cache are quantized and later overwritten the same way.
TEST(SpeculativeDecoding, Fp8KvCacheOutputsEqualDecodingWithoutSpeculation) {
  auto backend = cpu_backend(KvCacheDtype::kFp8E4m3);
  const std::vector<GenerationRequest> requests = mixed_requests();
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{});
  const EngineRun speculative = run(*backend, requests, ngram(4));
  EXPECT_EQ(speculative.outcomes, plain.outcomes);
  EXPECT_GT(speculative.stats.scheduler.speculation.accepted_tokens, 0u);
}

TEST(SpeculativeDecoding, PeriodicPromptAcceptsManyTokensPerStep) {
  auto backend = cpu_backend();
  const std::vector<GenerationRequest> requests = {request(periodic_prompt(4, 10, 700), 64)};
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{});
  const EngineRun speculative = run(*backend, requests, ngram(4));
  EXPECT_EQ(speculative.outcomes, plain.outcomes);
  const SpeculationStats& spec = speculative.stats.scheduler.speculation;
  ASSERT_GT(spec.verifications, 0u);
  EXPECT_GT(spec.mean_accepted_length(), 1.0);
  ASSERT_FALSE(spec.accepted_per_position.empty());
  for (size_t i = 1; i < spec.accepted_per_position.size(); ++i)
    EXPECT_LE(spec.accepted_per_position[i], spec.accepted_per_position[i - 1]);  // a position needs those before it
}

// Stops placed on tokens the plain run produced in the middle of what speculation accepts in one step.
TEST(SpeculativeDecoding, StopsInsideAnAcceptedRunEndWhereTheyWouldWithout) {
  auto backend = cpu_backend();
  const GenerationRequest base = request(periodic_prompt(4, 10, 700), 60);
  const Outcome reference = run(*backend, {base}, SpeculativeConfig{}).outcomes.at(0);
  ASSERT_EQ(reference.tokens.size(), 60u);
  std::vector<GenerationRequest> requests;
  for (size_t at : {size_t{9}, size_t{22}, size_t{37}}) {
    GenerationRequest by_id = base;
    by_id.stop_token_ids = {reference.tokens[at]};
    requests.push_back(by_id);
    GenerationRequest by_text = base;
    by_text.stop = {"<" + std::to_string(reference.tokens[at]) + "><" + std::to_string(reference.tokens[at + 1]) + ">"};
    requests.push_back(by_text);
  }
  for (int32_t max_tokens : {1, 2, 7, 13, 29}) requests.push_back(request(base.prompt, max_tokens));
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{});
  const EngineRun speculative = run(*backend, requests, ngram(8));
  EXPECT_EQ(speculative.outcomes, plain.outcomes);
  EXPECT_GT(speculative.stats.scheduler.speculation.accepted_tokens, 0u);
  for (const Outcome& o : plain.outcomes) EXPECT_NE(o.finish, FinishReason::kNone);
}

// Scheduler and CPU backend without the engine: after every step each running sequence holds exactly the blocks its
// computed tokens need, and the block manager's counts agree with the holders.
TEST(SpeculativeDecoding, RejectedProposalsGiveTheirBlocksBack) {
  auto backend = cpu_backend();
  BlockManager blocks(static_cast<int32_t>(backend->kv_cache().num_blocks), kBlockSize, true);
  SchedulerOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  options.max_model_len = kMaxModelLen;
  options.speculation = ngram(16);
  Scheduler scheduler(options, blocks);
  std::vector<std::unique_ptr<Sequence>> sequences;
  for (int32_t i = 0; i < 4; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<uint64_t>(i + 1);
    // Periods of 1..4 tokens and prompt lengths that put proposals across block boundaries.
    seq->tokens = periodic_prompt(i + 1, 13 - i, 300 * (i + 1));
    seq->num_prompt_tokens = seq->num_tokens();
    seq->max_tokens = 90;
    seq->ignore_eos = true;
    seq->sampling.temperature = i == 2 ? 0.9f : 0.0f;
    seq->sampling.seed = 99;
    scheduler.add(seq.get());
    sequences.push_back(std::move(seq));
  }
  uint64_t rejected = 0;
  std::vector<SequenceUpdate> updates;
  while (scheduler.has_work()) {
    Batch& batch = scheduler.schedule();
    ASSERT_FALSE(batch.sequences.empty());
    std::vector<SampleResult> results = backend->step(batch);
    updates.clear();
    const uint64_t drafts_before = scheduler.stats().speculation.draft_tokens;
    const uint64_t accepted_before = scheduler.stats().speculation.accepted_tokens;
    scheduler.postprocess(results, updates);
    rejected += (scheduler.stats().speculation.draft_tokens - drafts_before) -
                (scheduler.stats().speculation.accepted_tokens - accepted_before);
    std::vector<const Sequence*> holders;
    for (const Sequence* seq : scheduler.running()) {
      holders.push_back(seq);
      EXPECT_EQ(seq->block_table.size(), static_cast<size_t>(blocks.blocks_for_tokens(seq->num_computed)));
      if (seq->num_computed >= seq->num_prompt_tokens) {
        EXPECT_EQ(seq->num_computed, seq->num_tokens() - 1);
      }
    }
    ASSERT_EQ(blocks.check_consistency(holders), "");
  }
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(scheduler.stats().speculation.accepted_tokens, 0u);
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
  for (const auto& seq : sequences) EXPECT_EQ(seq->num_output_tokens(), 90);
}

TEST(SpeculativeDecoding, LargeBatchesStepWithoutProposals) {
  auto backend = cpu_backend();
  std::vector<GenerationRequest> requests;
  for (int32_t i = 0; i < 6; ++i) requests.push_back(request(periodic_prompt(3, 8, 100 * (i + 1)), 24));
  SpeculativeConfig config = ngram(4);
  config.disable_by_batch_size = 5;
  // All six prompts fit the first step, so six sequences decode together from then on.
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{}, 1000);
  const EngineRun limited = run(*backend, requests, config, 1000);
  EXPECT_EQ(limited.outcomes, plain.outcomes);
  EXPECT_EQ(limited.stats.scheduler.speculation.draft_tokens, 0u);
  config.disable_by_batch_size = 6;
  EXPECT_GT(run(*backend, requests, config, 1000).stats.scheduler.speculation.draft_tokens, 0u);
}

// Without adaptation (the cost-curve bench) every verification proposes what the lookup finds up to k, even after
// rejections; outputs stay those without speculation.
TEST(SpeculativeDecoding, FixedTokensKeepProposingAfterRejections) {
  auto backend = cpu_backend();
  const std::vector<GenerationRequest> requests = mixed_requests();
  const EngineRun plain = run(*backend, requests, SpeculativeConfig{});
  const EngineRun adaptive = run(*backend, requests, ngram(4));
  SpeculativeConfig fixed_config = ngram(4);
  fixed_config.adaptive = false;
  const EngineRun fixed = run(*backend, requests, fixed_config);
  EXPECT_EQ(fixed.outcomes, plain.outcomes);
  const SpeculationStats& a = adaptive.stats.scheduler.speculation;
  const SpeculationStats& f = fixed.stats.scheduler.speculation;
  ASSERT_LT(a.accepted_tokens, a.draft_tokens) << "the case needs rejections";
  EXPECT_GT(f.draft_tokens, a.draft_tokens);
  EXPECT_GT(static_cast<double>(f.draft_tokens) / static_cast<double>(f.verifications), 3.0);
}

TEST(SpeculativeDecoding, BackendWithoutMultiPositionSamplingRunsWithoutIt) {
  testing::FakeBackend backend(testing::FakeModelSpec{});
  ASSERT_FALSE(backend.supports_multi_position_sampling());
  EngineOptions options;
  options.speculation = ngram(4);
  Engine engine(backend, options);
  EXPECT_FALSE(engine.stats().speculation_active);
  GenerationRequest r = request(periodic_prompt(3, 8, 10), 12);
  r.logprobs = false;
  RequestHandle handle = engine.submit(r);
  while (engine.step() || engine.has_work()) {
  }
  EXPECT_EQ(handle.stream->usage().completion_tokens, 12);
  EXPECT_EQ(engine.stats().scheduler.speculation.draft_tokens, 0u);
}

TEST(SpeculativeDecoding, ValidateBatchRefusesAllPositionsUnlessSupported) {
  auto backend = cpu_backend();
  std::vector<int32_t> table = {0};
  SamplingParams params;
  Batch batch;
  batch.token_ids = {1, 2, 3};
  BatchSequence seq;
  seq.num_tokens = 3;
  seq.block_table = table;
  seq.sample = true;
  seq.sample_all_positions = true;
  seq.sampling = &params;
  std::vector<int32_t> output = {2, 3};
  seq.history = {{}, output};
  batch.sequences = {seq};
  EXPECT_EQ(batch.num_sampled(), 3);
  const ModelConfig& config = backend->config();
  EXPECT_NO_THROW(validate_batch(batch, config, backend->kv_cache(), kMaxModelLen, true));
  EXPECT_THROW(validate_batch(batch, config, backend->kv_cache(), kMaxModelLen), Error);
  EXPECT_EQ(backend->step(batch).size(), 3u);
  batch.sequences[0].history = {{}, {}};  // the proposals missing from the history
  EXPECT_THROW(backend->step(batch), Error);
}

// One fresh index per call: the proposals as a function of the token list alone.
std::vector<int32_t> propose_ngram(std::vector<int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens) {
  NgramIndex index;
  std::vector<int32_t> out;
  index.propose(tokens, min_n, max_n, max_tokens, out);
  return out;
}

TEST(NgramProposer, LongestLatestMatchContinuedPeriodically) {
  EXPECT_EQ(propose_ngram({1, 2, 3, 1, 2, 3, 1, 2}, 1, 4, 5), (std::vector<int32_t>{3, 1, 2, 3, 1}));
  // "7 8" occurs twice; the latest one (followed by 5) wins over the earlier (followed by 9).
  EXPECT_EQ(propose_ngram({7, 8, 9, 0, 7, 8, 5, 6, 7, 8}, 1, 2, 2), (std::vector<int32_t>{5, 6}));
  // The longer suffix "4 7 8" decides over the later "7 8".
  EXPECT_EQ(propose_ngram({4, 7, 8, 1, 7, 8, 2, 4, 7, 8}, 1, 3, 1), (std::vector<int32_t>{1}));
  EXPECT_TRUE(propose_ngram({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(propose_ngram({5, 6, 9, 5, 6}, 3, 4, 4).empty());  // only a 2-gram repeats
  EXPECT_EQ(propose_ngram({5, 5, 5}, 1, 4, 3), (std::vector<int32_t>{5, 5, 5}));
}

// The rule written out as a scan of the whole history: the reference of the incremental index.
std::vector<int32_t> scanned_proposal(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n,
                                      int32_t max_tokens) {
  std::vector<int32_t> out;
  const int64_t length = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, length - 1); n >= min_n; --n)
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(tokens.end() - n, tokens.end(), tokens.begin() + start)) continue;
      const int64_t shift = length - n - start;
      for (int64_t j = 0; j < max_tokens; ++j) {
        const int64_t source = length + j - shift;
        out.push_back(source < length ? tokens[static_cast<size_t>(source)]
                                      : out[static_cast<size_t>(source - length)]);
      }
      return out;
    }
  return out;
}

// One index kept across a growing token list (1-5 tokens appended per call, as accepted proposals arrive) proposes
// exactly what the scan does at every length, through the tables' growth; with a range too wide to index it scans;
// a shorter list or another range rebuilds the index.
TEST(NgramProposer, IncrementalIndexEqualsTheScan) {
  struct Case {
    int32_t min_n, max_n, vocab;
  };
  for (const Case c : {Case{1, 4, 6}, Case{2, 3, 3}, Case{1, 1, 40}, Case{3, 8, 2}, Case{1, 40, 4}}) {
    std::mt19937 random(static_cast<uint32_t>(c.min_n * 131 + c.max_n * 7 + c.vocab));
    std::vector<int32_t> tokens;
    NgramIndex index;
    std::vector<int32_t> out;
    int matched = 0;
    while (tokens.size() < 3000) {
      const int appended = 1 + static_cast<int>(random() % 5);
      for (int i = 0; i < appended; ++i) tokens.push_back(static_cast<int32_t>(random() % c.vocab));
      index.propose(tokens, c.min_n, c.max_n, 6, out);
      ASSERT_EQ(out, scanned_proposal(tokens, c.min_n, c.max_n, 6))
          << "range " << c.min_n << ".." << c.max_n << ", " << tokens.size() << " tokens";
      matched += !out.empty();
    }
    EXPECT_GT(matched, 100) << "the case must exercise matches";
    const std::vector<int32_t> shorter(tokens.begin(), tokens.begin() + 1000);
    index.propose(shorter, c.min_n, c.max_n, 6, out);
    EXPECT_EQ(out, scanned_proposal(shorter, c.min_n, c.max_n, 6));
    index.propose(shorter, c.min_n, c.max_n + 1, 6, out);
    EXPECT_EQ(out, scanned_proposal(shorter, c.min_n, c.max_n + 1, 6));
  }
}

TEST(SpeculationState, AdaptsToAcceptanceAndRecoversFromOff) {
  SpeculationState state;
  state.k = 4;
  state.adapt_after_verify(4, 4, 6);
  EXPECT_EQ(state.k, 5);
  state.adapt_after_verify(5, 2, 6);
  EXPECT_EQ(state.k, 2);
  state.adapt_after_verify(2, 0, 6);
  EXPECT_EQ(state.k, 1);
  state.adapt_after_verify(1, 0, 6);
  EXPECT_EQ(state.k, 0);
  state.shadow_token = 17;
  state.adapt_after_shadow(18);
  EXPECT_EQ(state.k, 0);
  state.shadow_token = 17;
  state.adapt_after_shadow(17);
  EXPECT_EQ(state.k, 1);
  EXPECT_EQ(state.shadow_token, -1);
}

}  // namespace
}  // namespace qinfer

namespace qinfer {
namespace {

// The seam itself: logits after each of k + 1 positions scored in one step equal, bit for bit, those of decoding the
// same tokens one step at a time.
TEST(SpeculativeDecoding, AllPositionLogitsEqualOneTokenSteps) {
  auto backend = cpu_backend();
  const int vocab = backend->config().vocab_size;
  std::vector<int32_t> table = {0, 1, 2};
  const std::vector<int32_t> prompt = periodic_prompt(3, 5, 400);
  const std::vector<int32_t> next = {11, 22, 33, 44, 55, 66};
  SamplingParams params;
  auto prefill = [&] {
    Batch batch;
    batch.token_ids = prompt;
    BatchSequence seq;
    seq.num_tokens = static_cast<int32_t>(prompt.size());
    seq.block_table = table;
    seq.sample = true;
    seq.sampling = &params;
    batch.sequences = {seq};
    backend->forward_logits(batch);
  };
  prefill();
  std::vector<float> one_by_one;
  for (size_t i = 0; i < next.size(); ++i) {
    Batch batch;
    batch.token_ids = {next[i]};
    BatchSequence seq;
    seq.num_tokens = 1;
    seq.num_cached = static_cast<int32_t>(prompt.size() + i);
    seq.block_table = table;
    seq.sample = true;
    seq.sampling = &params;
    batch.sequences = {seq};
    std::vector<float> logits = backend->forward_logits(batch);
    one_by_one.insert(one_by_one.end(), logits.begin(), logits.end());
  }
  prefill();
  Batch batch;
  batch.token_ids = next;
  BatchSequence seq;
  seq.num_tokens = static_cast<int32_t>(next.size());
  seq.num_cached = static_cast<int32_t>(prompt.size());
  seq.block_table = table;
  seq.sample = true;
  seq.sample_all_positions = true;
  seq.sampling = &params;
  std::vector<int32_t> output(next.begin() + 1, next.end());
  seq.history = {{}, output};
  batch.sequences = {seq};
  const std::vector<float> together = backend->forward_logits(batch);
  ASSERT_EQ(together.size(), next.size() * static_cast<size_t>(vocab));
  for (size_t i = 0; i < next.size(); ++i)
    EXPECT_TRUE(
        std::equal(together.begin() + i * vocab, together.begin() + (i + 1) * vocab, one_by_one.begin() + i * vocab))
        << "position " << i;
}

}  // namespace
}  // namespace qinfer
