// Speculative decoding with a draft model on the CPU backend: greedy requests give exactly the tokens and logprobs
// they give without speculation whatever the draft (the target itself: every proposal accepted; another random
// model: few), seeded sampled requests repeat themselves run to run and however they are batched, rejection sampling
// keeps the target's distribution (a chi-square test that a wrong rule fails), and a draft that cannot serve the
// target is refused.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "backend/factory.h"
#include "engine/draft_verification.h"
#include "engine/engine.h"
#include "model/test_model.h"
#include "testing/engine_run.h"

namespace qinfer {
namespace {

constexpr int kBlockSize = 16;
constexpr int kMaxModelLen = 160;

std::shared_ptr<const LoadedModel> model(const char* preset, uint64_t seed) {
  return std::make_shared<const LoadedModel>(make_dummy_model(test_model_preset(preset), seed, nullptr));
}

const std::shared_ptr<const LoadedModel>& target_model() {
  static const auto target = model("tiny", 7);
  return target;
}

// kv_cache_num_blocks 0: the default pool (the target's); a draft takes its target's count.
std::unique_ptr<Backend> cpu_backend(std::shared_ptr<const LoadedModel> weights, int64_t num_blocks = 0,
                                     int64_t kv_cache_bytes = 0) {
  BackendOptions options;
  options.device = "cpu";
  options.block_size = kBlockSize;
  options.max_model_len = kMaxModelLen;
  options.max_num_seqs = 8;
  options.num_threads = 2;
  options.kv_cache_num_blocks = num_blocks;
  options.kv_cache_bytes = kv_cache_bytes;
  return create_backend(std::move(weights), options);
}

SpeculativeConfig draft_model(int32_t k) {
  SpeculativeConfig config;
  config.method = SpeculativeMethod::kDraftModel;
  config.num_speculative_tokens = k;
  config.draft_model = "test";
  return config;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::kNone;
  bool operator==(const Outcome&) const = default;
};

struct EngineRun {
  std::vector<Outcome> outcomes;
  EngineStats stats;
};

EngineRun run(Backend& target, Backend* draft, const std::vector<GenerationRequest>& requests,
              SpeculativeConfig speculation) {
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  options.speculation = speculation;
  Engine engine(target, options, draft);
  EngineRun result;
  for (const std::vector<StreamDelta>& deltas : run_to_completion(engine, requests)) {
    Outcome outcome;
    for (const StreamDelta& delta : deltas) {
      outcome.tokens.insert(outcome.tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
      for (const TokenLogprobs& lp : delta.logprobs) outcome.logprobs.push_back(lp.logprob);
      if (delta.finish_reason != FinishReason::kNone) outcome.finish = delta.finish_reason;
    }
    result.outcomes.push_back(outcome);
  }
  result.stats = engine.stats();
  EXPECT_EQ(result.stats.num_free_blocks, result.stats.num_blocks);
  return result;
}

GenerationRequest request(int32_t offset, int32_t prompt_len, int32_t max_tokens, float temperature) {
  GenerationRequest r;
  r.prompt.resize(static_cast<size_t>(prompt_len));
  std::iota(r.prompt.begin(), r.prompt.end(), offset);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.seed = 4321 + static_cast<uint64_t>(offset);
  r.ignore_eos = true;
  r.logprobs = true;
  return r;
}

// Greedy requests, one with penalties, of lengths that put proposals across block boundaries.
std::vector<GenerationRequest> greedy_requests() {
  std::vector<GenerationRequest> requests = {request(100, 9, 40, 0), request(900, 31, 33, 0), request(4000, 17, 24, 0)};
  requests[2].sampling.repetition_penalty = 1.2f;
  requests[2].sampling.presence_penalty = 0.3f;
  return requests;
}

std::vector<GenerationRequest> sampled_requests() {
  std::vector<GenerationRequest> requests = {request(200, 12, 30, 0.8f), request(3000, 20, 26, 1.0f)};
  requests[0].sampling.top_k = 20;
  requests[0].sampling.top_p = 0.9f;
  requests[1].sampling.frequency_penalty = 0.4f;
  return requests;
}

TEST(DraftModelSpeculation, TheTargetAsItsOwnDraftAcceptsEveryProposalAndChangesNothing) {
  auto target = cpu_backend(target_model());
  auto draft = cpu_backend(target_model(), target->kv_cache().num_blocks);
  const std::vector<GenerationRequest> requests = greedy_requests();
  const EngineRun plain = run(*target, nullptr, requests, SpeculativeConfig{});
  for (int32_t k : {1, 4, 16}) {
    const EngineRun speculative = run(*target, draft.get(), requests, draft_model(k));
    EXPECT_EQ(speculative.outcomes, plain.outcomes) << "k = " << k;
    const SpeculationStats& spec = speculative.stats.scheduler.speculation;
    EXPECT_GT(spec.draft_tokens, 0u) << "k = " << k;
    EXPECT_EQ(spec.accepted_tokens, spec.draft_tokens) << "k = " << k;
    EXPECT_LT(speculative.stats.scheduler.steps, plain.stats.scheduler.steps) << "k = " << k;
    EXPECT_GT(speculative.stats.draft.steps, 0u);
    EXPECT_GE(speculative.stats.draft.proposed_tokens, spec.draft_tokens);
  }
  // Sampled: q equals p, so every proposal is accepted too.
  const EngineRun sampled = run(*target, draft.get(), sampled_requests(), draft_model(4));
  const SpeculationStats& spec = sampled.stats.scheduler.speculation;
  EXPECT_GT(spec.draft_tokens, 0u);
  EXPECT_EQ(spec.accepted_tokens, spec.draft_tokens);
}

TEST(DraftModelSpeculation, AnotherModelAsDraftChangesNoGreedyToken) {
  auto target = cpu_backend(target_model());
  auto draft = cpu_backend(model("tiny-untied", 11), target->kv_cache().num_blocks);
  const std::vector<GenerationRequest> requests = greedy_requests();
  const EngineRun plain = run(*target, nullptr, requests, SpeculativeConfig{});
  const EngineRun speculative = run(*target, draft.get(), requests, draft_model(4));
  EXPECT_EQ(speculative.outcomes, plain.outcomes);
  const SpeculationStats& spec = speculative.stats.scheduler.speculation;
  EXPECT_GT(spec.verifications, 0u);
  EXPECT_LT(spec.accepted_tokens * 2, spec.draft_tokens);  // random models rarely agree
}

// A prompt that extends one served before maps its blocks from the prefix cache, and the draft's K/V under those
// block ids come with them: the draft catches up on the new tokens only, the output is still exact, and the target as
// its own draft still has every proposal accepted (the K/V it found under the cached blocks are right).
TEST(DraftModelSpeculation, PrefixCachedBlocksCarryTheDraftsKv) {
  auto target = cpu_backend(target_model());
  auto draft = cpu_backend(target_model(), target->kv_cache().num_blocks);
  GenerationRequest first = request(300, 4 * kBlockSize, 12, 0);
  GenerationRequest second = first;
  for (int32_t i = 0; i < kBlockSize; ++i) second.prompt.push_back(700 + i);
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  const auto tokens_of = [](const std::vector<StreamDelta>& deltas) {
    std::vector<int32_t> tokens;
    for (const StreamDelta& delta : deltas) tokens.insert(tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
    return tokens;
  };
  Engine plain(*target, options);
  const std::vector<int32_t> want = tokens_of(run_to_completion(plain, {second}).front());
  options.speculation = draft_model(4);
  Engine engine(*target, options, draft.get());
  run_to_completion(engine, {first});
  const uint64_t first_catch_up = engine.stats().draft.catch_up_tokens;
  const SpeculationStats before = engine.stats().scheduler.speculation;
  EXPECT_GE(first_catch_up, first.prompt.size());
  const std::vector<int32_t> got = tokens_of(run_to_completion(engine, {second}).front());
  EXPECT_EQ(got, want);
  const uint64_t second_catch_up = engine.stats().draft.catch_up_tokens - first_catch_up;
  const SpeculationStats& after = engine.stats().scheduler.speculation;
  EXPECT_GT(after.draft_tokens, before.draft_tokens);
  EXPECT_EQ(after.accepted_tokens - before.accepted_tokens, after.draft_tokens - before.draft_tokens);
  // The 64 cached prompt tokens are not fed again: the new block, then the accepted tokens.
  EXPECT_LT(second_catch_up, first.prompt.size()) << "the draft recomputed the cached prefix";

  // Blocks cached by a request the draft never ran for (one output token: no proposal step) carry nothing: the
  // draft feeds the whole prompt, and its proposals are still all accepted.
  Engine fresh(*target, options, draft.get());
  GenerationRequest unproposed = request(1300, 4 * kBlockSize, 1, 0), extended = unproposed;
  for (int32_t i = 0; i < kBlockSize; ++i) extended.prompt.push_back(1700 + i);
  extended.max_tokens = 12;
  run_to_completion(fresh, {unproposed});
  EXPECT_EQ(fresh.stats().draft.catch_up_tokens, 0u);
  run_to_completion(fresh, {extended});
  EXPECT_GE(fresh.stats().draft.catch_up_tokens, extended.prompt.size());
  const SpeculationStats& spec = fresh.stats().scheduler.speculation;
  EXPECT_GT(spec.draft_tokens, 0u);
  EXPECT_EQ(spec.accepted_tokens, spec.draft_tokens);
}

// A pool so small that sequences are preempted and recomputed: the draft starts over with them.
TEST(DraftModelSpeculation, PreemptedSequencesStayExact) {
  auto target = cpu_backend(target_model(), 10);  // one sequence of max_model_len, at least
  auto draft = cpu_backend(target_model(), 10);
  const std::vector<GenerationRequest> requests = {request(100, 20, 60, 0), request(500, 20, 60, 0),
                                                   request(900, 20, 60, 0)};
  const EngineRun plain = run(*target, nullptr, requests, SpeculativeConfig{});
  const EngineRun speculative = run(*target, draft.get(), requests, draft_model(4));
  EXPECT_EQ(speculative.outcomes, plain.outcomes);
  EXPECT_GT(speculative.stats.scheduler.preemptions, 0u);
}

TEST(DraftModelSpeculation, SeededSampledRequestsRepeatHoweverBatched) {
  auto target = cpu_backend(target_model());
  auto draft = cpu_backend(model("tiny-untied", 11), target->kv_cache().num_blocks);
  std::vector<GenerationRequest> requests = sampled_requests();
  for (const GenerationRequest& greedy : greedy_requests()) requests.push_back(greedy);
  const EngineRun first = run(*target, draft.get(), requests, draft_model(4));
  const EngineRun second = run(*target, draft.get(), requests, draft_model(4));
  EXPECT_EQ(first.outcomes, second.outcomes);
  for (size_t i = 0; i < requests.size(); ++i) {
    const EngineRun alone = run(*target, draft.get(), {requests[i]}, draft_model(4));
    EXPECT_EQ(alone.outcomes.at(0), first.outcomes[i]) << "request " << i;
  }
  EXPECT_GT(first.stats.scheduler.speculation.verifications, 0u);
}

TEST(DraftModelSpeculation, RefusesADraftThatCannotServeTheTarget) {
  auto target = cpu_backend(target_model());
  auto expect_refused = [&](Backend* draft, ErrorKind kind, const std::string& reason) {
    EngineOptions options;
    options.max_num_seqs = 8;
    options.max_num_batched_tokens = 64;
    options.speculation = draft_model(4);
    try {
      Engine engine(*target, options, draft);
      ADD_FAILURE() << "accepted: " << reason;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  };
  expect_refused(nullptr, ErrorKind::kInvalidArgument, "needs the draft model's backend");
  ModelConfig other_vocabulary = test_model_preset("tiny");
  other_vocabulary.vocab_size = 4096;
  auto foreign = cpu_backend(std::make_shared<const LoadedModel>(make_dummy_model(other_vocabulary, 3, nullptr)),
                             target->kv_cache().num_blocks);
  expect_refused(foreign.get(), ErrorKind::kUnsupported, "vocabulary");
  auto small = cpu_backend(target_model(), target->kv_cache().num_blocks - 1);
  expect_refused(small.get(), ErrorKind::kInvalidArgument, "must hold the target's block ids");
}

// Rejection sampling on its own: over many seeds, the first token it produces after a proposal drawn from q follows p
// (chi-square over the candidates), while the rule that resamples from p instead of max(0, p - q) does not.
double chi_square(const std::vector<int>& counts, const SamplingDistribution& p, int trials) {
  double statistic = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double expected = p.weights[i] / p.mass * trials;
    const double diff = counts[static_cast<size_t>(p.ids[i])] - expected;
    statistic += diff * diff / expected;
  }
  return statistic;
}

TEST(DraftModelSpeculation, RejectionSamplingKeepsTheTargetDistribution) {
  constexpr int kVocab = 6, kTrials = 20000;
  // Target and draft logits for the verified position, and the target's row after it (the bonus position).
  const std::vector<float> target = {1.5f, 0.2f, -0.4f, 0.9f, -1.0f, 0.3f, 0, 0, 0, 0, 0, 0};
  const std::vector<float> draft = {-0.5f, 1.2f, 0.4f, 0.6f, 0.8f, -0.2f};
  for (const int top_k : {0, 4}) {
    SamplingParams params;
    params.temperature = 0.9f;
    params.top_k = top_k;
    const SamplingDistribution p = sampling_distribution(std::span(target).first(kVocab), params, {});
    std::vector<int> counts(kVocab, 0), wrong_counts(kVocab, 0);
    for (int trial = 0; trial < kTrials; ++trial) {
      params.seed = 1000003u * static_cast<uint64_t>(trial) + 17;
      SamplingParams draft_params = params;
      draft_params.seed = draft_proposal_seed(params.seed);
      const SamplingDistribution q = sampling_distribution(draft, draft_params, {});
      const int32_t proposal = draw_from(q, sampling_uniform(draft_params.seed, 0));
      const std::vector<int32_t> output = {proposal};
      const std::vector<SampleResult> results =
          rejection_sample(target, kVocab, params, {{}, output}, 0, output, std::span(&q, 1));
      ASSERT_EQ(results.size(), 2u);
      ++counts[static_cast<size_t>(results[0].token)];
      // The wrong rule: the same accept test, but a rejected proposal is replaced by a draw from p itself.
      const bool accepted = sampling_uniform(params.seed, 0) * q.probability(proposal) < p.probability(proposal);
      ++wrong_counts[static_cast<size_t>(accepted ? proposal
                                                  : draw_from(p, sampling_uniform(residual_seed(params.seed), 0)))];
    }
    // 5 degrees of freedom at most: P(chi-square > 30) < 2e-5.
    EXPECT_LT(chi_square(counts, p, kTrials), 30.0) << "top_k " << top_k;
    EXPECT_GT(chi_square(wrong_counts, p, kTrials), 30.0) << "top_k " << top_k;
    for (int id = 0; id < kVocab; ++id) {
      if (p.probability(id) == 0) {
        EXPECT_EQ(counts[static_cast<size_t>(id)], 0) << "outside top-k: " << id;
      }
    }
  }
}

}  // namespace
}  // namespace qinfer
