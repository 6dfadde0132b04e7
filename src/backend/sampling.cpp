#include "backend/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace qinfer {

std::optional<Error> SamplingParams::validate(int vocab_size) const {
  auto refused = [](const char* field, const std::string& range, auto value) {
    return Error(ErrorKind::kInvalidArgument,
                 std::string(field) + " must be " + range + ", got " + std::to_string(value), field);
  };
  if (!std::isfinite(temperature) || temperature < 0.0f || temperature > 100.0f)
    return refused("temperature", "in [0, 100]", temperature);
  if (top_k < -1 || top_k > vocab_size)
    return refused("top_k", "-1, 0 or in [1, " + std::to_string(vocab_size) + "]", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return refused("top_p", "in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return refused("min_p", "in [0, 1]", min_p);
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
    return refused("repetition_penalty", "in (0, 10]", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return refused("presence_penalty", "in [-2, 2]", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return refused("frequency_penalty", "in [-2, 2]", frequency_penalty);
  if (num_top_logprobs < 0 || num_top_logprobs > 20) return refused("top_logprobs", "in [0, 20]", num_top_logprobs);
  return std::nullopt;
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

float sampling_uniform(uint64_t seed, uint64_t step) {
  // Key = seed, counter = (step, 0); the first output word gives 24 random mantissa bits.
  auto out = philox4x32_10({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0, 0},
                           {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return static_cast<float>(out[0] >> 8) * 0x1p-24f;
}

PenaltyTokens::PenaltyTokens(const SamplingParams& params, std::span<const int32_t> prompt)
    : active_(params.has_penalties()) {
  // As sample_token() reads the history: the repetition penalty covers prompt and output, presence/frequency the
  // output.
  if (active_ && params.repetition_penalty != 1.0f)
    for (int32_t token : prompt) visit(token, false);
}

void PenaltyTokens::add_output(int32_t token) {
  if (active_) visit(token, true);
}

void PenaltyTokens::visit(int32_t token, bool output) {
  auto [it, inserted] = index_.try_emplace(token, entries_.size());
  if (inserted) {
    min_token_ = entries_.empty() ? token : std::min(min_token_, token);
    max_token_ = entries_.empty() ? token : std::max(max_token_, token);
    entries_.push_back({token, 0});
  }
  if (output) ++entries_[it->second].output_count;
}

void apply_logit_constraints(std::span<float> logits, std::span<const uint32_t> allowed,
                             std::span<const LogitBias> bias) {
  if (!allowed.empty())
    for (size_t i = 0; i < logits.size(); ++i)
      if (!(allowed[i / 32] >> (i % 32) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
  for (const LogitBias& b : bias) logits[static_cast<size_t>(b.token)] += b.bias;
}

namespace {

// Applies HF repetition penalty (prompt + output) and OpenAI presence/frequency penalties (output only).
void apply_penalties(std::vector<float>& logits, const SamplingParams& p, const TokenHistory& history) {
  const int vocab = static_cast<int>(logits.size());
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(logits.size(), false);
    auto mark = [&](std::span<const int32_t> ids) {
      for (int32_t id : ids)
        if (id >= 0 && id < vocab) seen[static_cast<size_t>(id)] = true;
    };
    mark(history.prompt);
    mark(history.output);
    for (size_t i = 0; i < logits.size(); ++i)
      if (seen[i]) logits[i] = logits[i] > 0 ? logits[i] / p.repetition_penalty : logits[i] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t id : history.output)
      if (id >= 0 && id < vocab) ++counts[id];
    for (auto [id, n] : counts)
      logits[static_cast<size_t>(id)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }
}

// Index of the largest value, lowest index on ties.
int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

double SamplingDistribution::probability(int32_t token) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), token);
  if (it == ids.end() || *it != token || mass <= 0) return 0;
  return weights[static_cast<size_t>(it - ids.begin())] / mass;
}

SamplingDistribution sampling_distribution(std::span<const float> logits, const SamplingParams& p,
                                           const TokenHistory& history) {
  const size_t vocab = logits.size();
  SamplingDistribution result;
  std::vector<float> work(logits.begin(), logits.end());
  if (p.has_penalties()) apply_penalties(work, p, history);
  if (p.greedy()) {
    result.ids = {argmax(work)};
    result.weights = {1.0};
    result.mass = 1.0;
    return result;
  }
  for (float& x : work) x /= p.temperature;
  // Candidates in descending order of (processed) logit, lower id first on ties.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return work[a] > work[b] || (work[a] == work[b] && a < b); };
  size_t kept = vocab;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    kept = static_cast<size_t>(p.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(kept), order.end(), by_logit);
  } else if (p.top_p < 1.0f) {
    std::sort(order.begin(), order.end(), by_logit);
  }
  const float top = *std::max_element(work.begin(), work.end());  // always kept: every filter keeps the max
  std::vector<double> prob(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += prob[i] = std::exp(static_cast<double>(work[order[i]] - top));
  if (p.top_p < 1.0f) {
    // Smallest prefix (in probability order) whose mass reaches top_p.
    double cumulative = 0;
    size_t n = 0;
    while (n < kept) {
      cumulative += prob[n++] / total;
      if (cumulative >= p.top_p) break;
    }
    kept = n;
  }
  // min_p: keep tokens with probability >= min_p * max probability (the max has prob[.] == 1 before normalising).
  for (size_t i = 0; i < kept; ++i)
    if (p.min_p <= 0.0f || prob[i] >= p.min_p) result.ids.push_back(order[i]);
  // Ascending token-id order, so every backend walks the same sequence.
  std::sort(result.ids.begin(), result.ids.end());
  result.weights.reserve(result.ids.size());
  for (int32_t id : result.ids) {
    result.weights.push_back(std::exp(static_cast<double>(work[static_cast<size_t>(id)] - top)));
    result.mass += result.weights.back();
  }
  return result;
}

int32_t draw_from(const SamplingDistribution& distribution, float uniform) {
  const double target = static_cast<double>(uniform) * distribution.mass;
  double cumulative = 0;
  for (size_t i = 0; i < distribution.ids.size(); ++i) {
    cumulative += distribution.weights[i];
    if (cumulative > target) return distribution.ids[i];
  }
  return distribution.ids.back();
}

SampleResult raw_logprob_result(std::span<const float> logits, int32_t token, int num_top) {
  const size_t vocab = logits.size();
  SampleResult result;
  result.token = token;
  // Log-softmax of the raw logits, accumulated in double.
  float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - max_logit));
  const float log_norm = max_logit + static_cast<float>(std::log(sum));
  result.logprob = logits[static_cast<size_t>(token)] - log_norm;
  if (num_top > 0) {
    size_t k = std::min(vocab, static_cast<size_t>(num_top));
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (size_t i = 0; i < k; ++i) result.top.push_back({ids[i], logits[static_cast<size_t>(ids[i])] - log_norm});
  }
  return result;
}

SampleResult sample_token(std::span<const float> logits, const SamplingParams& p, const TokenHistory& history,
                          uint64_t step) {
  const SamplingDistribution distribution = sampling_distribution(logits, p, history);
  const int32_t token = p.greedy() ? distribution.ids.front() : draw_from(distribution, sampling_uniform(p.seed, step));
  return raw_logprob_result(logits, token, p.num_top_logprobs);
}

}  // namespace qinfer
