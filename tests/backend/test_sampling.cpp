// The reference sampler: Philox known answers, greedy/filters/penalties semantics, seeded reproducibility and the
// sampled distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "backend/sampling.h"

namespace qinfer {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Known-answer vectors published with Random123 (kat_vectors, philox4x32 with 10 rounds).
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(SamplingUniform, InUnitIntervalAndSeedDependent) {
  EXPECT_FLOAT_EQ(sampling_uniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) * 0x1p-24f);
  for (uint64_t step = 0; step < 1000; ++step) {
    float u = sampling_uniform(42, step);
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
  EXPECT_NE(sampling_uniform(1, 5), sampling_uniform(2, 5));
}

std::vector<float> logits_from_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(SampleToken, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(sample_token(logits, p, {}, 0).token, 1);
}

TEST(SampleToken, LogprobsAreLogSoftmaxOfRawLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.num_top_logprobs = 2;
  p.repetition_penalty = 2.0f;  // penalties change the choice, never the reported logprobs
  std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  std::vector<int32_t> prompt = {1};
  SampleResult r = sample_token(logits, p, {prompt, {}}, 0);
  double norm = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_EQ(r.token, 2);  // 3/2 = 1.5 < 2
  EXPECT_NEAR(r.logprob, 2.0 - norm, 1e-6);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_NEAR(r.top[0].logprob, 3.0 - norm, 1e-6);
  EXPECT_EQ(r.top[1].token, 2);
}

TEST(SampleToken, PresenceAndFrequencyPenaltiesUseOutputCounts) {
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.4f;
  std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  std::vector<int32_t> output = {0, 0};  // token 0: 2.0 - 0.5 - 0.8 = 0.7 < 1.5
  std::vector<int32_t> prompt = {1};     // prompt tokens are not penalised by presence/frequency
  EXPECT_EQ(sample_token(logits, p, {prompt, output}, 0).token, 1);
}

TEST(SampleToken, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 4.0f;
  std::vector<float> logits = {-0.1f, -0.3f, 0.2f};
  std::vector<int32_t> seen = {0, 2};  // token 0 -> -0.4, token 2 -> 0.05: token 2 still wins over -0.3
  EXPECT_EQ(sample_token(logits, p, {seen, {}}, 0).token, 2);
  p.repetition_penalty = 10.0f;  // token 2 -> 0.02, token 0 -> -1.0, token 1 -0.3: token 2
  EXPECT_EQ(sample_token(logits, p, {seen, {}}, 0).token, 2);
  std::vector<int32_t> all = {0, 1, 2};
  p.repetition_penalty = 1.5f;  // -0.15, -0.45, 0.1333
  EXPECT_EQ(sample_token(logits, p, {all, {}}, 0).token, 2);
}

TEST(SampleToken, SameSeedAndStepGiveSameToken) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(i * 0.37));
  for (uint64_t step = 0; step < 50; ++step)
    EXPECT_EQ(sample_token(logits, p, {}, step).token, sample_token(logits, p, {}, step).token);
}

// Frequencies over many steps follow the filtered, renormalised distribution.
std::map<int32_t, double> empirical(const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::map<int32_t, double> freq;
  for (int i = 0; i < n; ++i) freq[sample_token(logits, p, {}, static_cast<uint64_t>(i)).token] += 1.0 / n;
  return freq;
}

TEST(SampleToken, TemperatureOneFollowsSoftmax) {
  std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  SamplingParams p;
  p.seed = 7;
  auto freq = empirical(logits_from_probs(probs), p, 20000);
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(freq[static_cast<int32_t>(i)], probs[i], 0.015);
}

TEST(SampleToken, TopKTopPAndMinPRestrictTheSupport) {
  std::vector<double> probs = {0.05, 0.4, 0.3, 0.15, 0.1};
  auto logits = logits_from_probs(probs);
  SamplingParams p;
  p.seed = 3;
  p.top_k = 2;  // {1, 2} renormalised: 4/7, 3/7
  auto f = empirical(logits, p, 20000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[1], 4.0 / 7, 0.015);
  p.top_k = 0;
  p.top_p = 0.8f;  // 0.4 + 0.3 = 0.7 < 0.8, + 0.15 reaches it: {1, 2, 3}
  f = empirical(logits, p, 20000);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_NEAR(f[3], 0.15 / 0.85, 0.015);
  p.top_p = 1.0f;
  p.min_p = 0.3f;  // keep p >= 0.12: {1, 2, 3}
  f = empirical(logits, p, 20000);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_EQ(f.count(4), 0u);
}

TEST(SampleToken, LowTemperatureSharpens) {
  std::vector<double> probs = {0.6, 0.4};
  SamplingParams p;
  p.temperature = 0.25f;  // 0.6^4 : 0.4^4 = 0.835 : 0.165
  p.seed = 11;
  auto f = empirical(logits_from_probs(probs), p, 20000);
  EXPECT_NEAR(f[0], 0.1296 / (0.1296 + 0.0256), 0.015);
}

TEST(SamplingParams, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  ASSERT_TRUE(p.validate(100));
  EXPECT_EQ(p.validate(100)->field(), "top_p");
  EXPECT_NE(std::string(p.validate(100)->what()).find("top_p must be in (0, 1]"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_EQ(p.validate(100)->field(), "temperature");
  p = {};
  p.top_k = 1000;
  EXPECT_EQ(p.validate(100)->field(), "top_k");
  EXPECT_EQ(p.validate(100)->kind(), ErrorKind::kInvalidArgument);
  EXPECT_FALSE(SamplingParams{}.validate(100));
}

}  // namespace
}  // namespace qinfer

namespace qinfer {
namespace {

// The history as sample_token() reads it for penalties: distinct tokens (the prompt only under a repetition penalty)
// with their output counts.
std::map<int32_t, int32_t> penalty_counts_of_history(const SamplingParams& p, std::span<const int32_t> prompt,
                                                     std::span<const int32_t> output) {
  std::map<int32_t, int32_t> counts;
  if (!p.has_penalties()) return counts;
  if (p.repetition_penalty != 1.0f)
    for (int32_t token : prompt) counts.emplace(token, 0);
  for (int32_t token : output) ++counts[token];
  return counts;
}

std::map<int32_t, int32_t> counts_of(const PenaltyTokens& tokens) {
  std::map<int32_t, int32_t> counts;
  for (const PenaltyTokenCount& e : tokens.entries()) EXPECT_TRUE(counts.emplace(e.token, e.output_count).second);
  return counts;
}

TEST(PenaltyTokens, FollowTheHistoryTokenByToken) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> token(-3, 40);  // many repeats, some ids outside any vocabulary
  for (const auto& [repetition, presence] : std::vector<std::pair<float, float>>{{1.2f, 0}, {1, 0.5f}, {1, 0}}) {
    SamplingParams p;
    p.repetition_penalty = repetition;
    p.presence_penalty = presence;
    std::vector<int32_t> prompt(30), output;
    for (auto& t : prompt) t = token(rng);
    PenaltyTokens tokens(p, prompt);
    EXPECT_EQ(counts_of(tokens), penalty_counts_of_history(p, prompt, output));
    for (int step = 0; step < 50; ++step) {
      output.push_back(token(rng));
      tokens.add_output(output.back());
      EXPECT_EQ(counts_of(tokens), penalty_counts_of_history(p, prompt, output)) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace qinfer

namespace qinfer {
namespace {

TEST(LogitConstraints, MaskThenBias) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const std::vector<uint32_t> allowed = {0b10110u};  // tokens 1, 2, 4
  const std::vector<LogitBias> bias = {{2, 10.0f}, {0, 100.0f}};
  apply_logit_constraints(logits, allowed, bias);
  EXPECT_EQ(logits[0], -std::numeric_limits<float>::infinity());  // masked stays masked whatever its bias
  EXPECT_EQ(logits[1], 2.0f);
  EXPECT_EQ(logits[2], 13.0f);
  EXPECT_EQ(logits[3], -std::numeric_limits<float>::infinity());
  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(sample_token(logits, greedy, {}, 0).token, 2);
  SamplingParams random;
  for (uint64_t step = 0; step < 200; ++step) {
    const int32_t t = sample_token(logits, random, {}, step).token;
    EXPECT_TRUE(t == 1 || t == 2 || t == 4) << t;
  }
}

}  // namespace
}  // namespace qinfer
