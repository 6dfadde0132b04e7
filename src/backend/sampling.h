// Per-request sampling parameters and the host reference sampler. Backends sample on their device; this file is the
// definition of what they must compute (the CUDA sampler is tested against it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/error.h"

namespace qinfer {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy (argmax, lowest id on ties)
  int top_k = 0;                    // 0 or -1: off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // HF semantics over prompt + output tokens; 1: off
  float presence_penalty = 0.0f;    // OpenAI semantics over output tokens
  float frequency_penalty = 0.0f;   // OpenAI semantics over output tokens
  uint64_t seed = 0;
  int num_top_logprobs = 0;  // top-K logprobs to return per token (the chosen token's logprob is always returned)

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Empty when valid, else Error(kInvalidArgument) with the field set and named in the message (for 400 responses and
  // CLI errors).
  std::optional<Error> validate(int vocab_size) const;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // natural log of softmax over the raw logits
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;              // of `token` under the raw logits
  std::vector<TokenLogprob> top;  // num_top_logprobs entries, most likely first
};

// OpenAI logit_bias: added to a token's logit before sampling.
struct LogitBias {
  int32_t token = 0;
  float bias = 0;
};

// The logits a constrained row is sampled from, in place: with `allowed` (a bitmask, bit id % 32 of word id / 32,
// covering the vocabulary) every other token becomes -inf; then each bias is added (ids distinct, in the
// vocabulary). Logprobs of a constrained row are of these logits. Every backend applies exactly this before the rest
// of sample_token().
void apply_logit_constraints(std::span<float> logits, std::span<const uint32_t> allowed,
                             std::span<const LogitBias> bias);

// Token history a sequence carries for penalties: prompt then generated tokens.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> output;
};

// A token the penalties touch, with how often it appears in the output (0: in the prompt only).
struct PenaltyTokenCount {
  int32_t token = 0;
  int32_t output_count = 0;
};

// The distinct tokens of a sequence's history that its penalties read (the prompt under a repetition penalty, every
// output token) with their output counts, in first-seen order, kept up to date token by token: a backend reads them in
// O(distinct tokens) per step instead of walking the whole history. Empty for sampling without penalties. Ids outside
// the vocabulary are kept; readers skip them, as sample_token() does.
class PenaltyTokens {
 public:
  PenaltyTokens() = default;
  PenaltyTokens(const SamplingParams& params, std::span<const int32_t> prompt);
  void add_output(int32_t token);
  std::span<const PenaltyTokenCount> entries() const { return entries_; }
  // Whether every entry's id lies in [0, vocab): a reader may then take entries() as they are.
  bool within_vocabulary(int vocab) const { return entries_.empty() || (min_token_ >= 0 && max_token_ < vocab); }

 private:
  void visit(int32_t token, bool output);
  bool active_ = false;
  int32_t min_token_ = 0, max_token_ = 0;  // over entries_
  std::vector<PenaltyTokenCount> entries_;
  std::unordered_map<int32_t, size_t> index_;  // token -> its entry
};

// Philox4x32-10 (Salmon et al., SC'11): the counter-based generator behind sampling_uniform.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Uniform float in [0, 1) for (seed, step): Philox4x32-10, so that a seeded request gives the same tokens however it
// is batched, on any backend.
float sampling_uniform(uint64_t seed, uint64_t step);

// The distribution sample_token() draws from after penalties, temperature, top-k, top-p and min-p: the candidate ids
// in ascending order with unnormalised weights (exp of the processed logit minus the largest; greedy: the argmax alone
// with weight 1) and their sum. Speculative decoding with a draft model compares two of them (rejection sampling).
struct SamplingDistribution {
  std::vector<int32_t> ids;     // ascending
  std::vector<double> weights;  // [ids.size()], > 0
  double mass = 0;              // sum of weights, accumulated in id order
  // The probability of `token` (0 when it is not a candidate).
  double probability(int32_t token) const;
};

SamplingDistribution sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                                           const TokenHistory& history);

// Inverse CDF over the candidates in ascending id order with `uniform` in [0, 1): the first id whose cumulative weight
// exceeds uniform * mass (the last id when rounding leaves none).
int32_t draw_from(const SamplingDistribution& distribution, float uniform);

// `token` with its logprob under the raw `logits` and the num_top most likely ids (lower id first on ties).
SampleResult raw_logprob_result(std::span<const float> logits, int32_t token, int num_top);

// Reference sampler. `logits` [vocab] are the model's raw logits (left unchanged); `step` is the index of the token
// being generated (0 for the first), which selects the random number.
SampleResult sample_token(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                          uint64_t step);

}  // namespace qinfer
