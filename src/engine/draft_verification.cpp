#include "engine/draft_verification.h"

#include <algorithm>

#include "util/error.h"

namespace qinfer {

// Odd constants (the splitmix64 increment and a Weyl step) that move a seed to an unrelated Philox key.
uint64_t draft_proposal_seed(uint64_t seed) { return seed ^ 0x9e3779b97f4a7c15ull; }
uint64_t residual_seed(uint64_t seed) { return seed ^ 0xbf58476d1ce4e5b9ull; }

namespace {

// normalize(max(0, p - q)) as weights over p's candidates, without `rejected` (rejecting it means p(x) < q(x), where
// the residual is zero anyway; dropping it keeps rounding from drawing it again).
SamplingDistribution residual_distribution(const SamplingDistribution& p, const SamplingDistribution& q,
                                           int32_t rejected) {
  SamplingDistribution residual;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const int32_t id = p.ids[i];
    const double weight = p.weights[i] / p.mass - q.probability(id);
    if (id == rejected || weight <= 0) continue;
    residual.ids.push_back(id);
    residual.weights.push_back(weight);
    residual.mass += weight;
  }
  return residual;
}

}  // namespace

std::vector<SampleResult> rejection_sample(std::span<const float> logits, int vocab, const SamplingParams& params,
                                           const TokenHistory& history, uint64_t sample_step,
                                           std::span<const int32_t> drafts, std::span<const SamplingDistribution> q) {
  const size_t num_drafts = drafts.size();
  QINFER_CHECK(q.size() == num_drafts && logits.size() == (num_drafts + 1) * static_cast<size_t>(vocab));
  QINFER_CHECK(history.output.size() >= num_drafts);
  const size_t base_output = history.output.size() - num_drafts;
  std::vector<SampleResult> results;
  for (size_t i = 0; i <= num_drafts; ++i) {
    const std::span<const float> row = logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
    const TokenHistory seen{history.prompt, history.output.first(base_output + i)};
    const uint64_t step = sample_step + i;
    if (i == num_drafts) {  // every proposal kept: the bonus token, the ordinary sample of this index
      results.push_back(sample_token(row, params, seen, step));
      break;
    }
    const SamplingDistribution p = sampling_distribution(row, params, seen);
    const int32_t proposal = drafts[i];
    const double p_proposal = p.probability(proposal), q_proposal = q[i].probability(proposal);
    // Accept with probability min(1, p/q); u < p/q written without the division.
    if (static_cast<double>(sampling_uniform(params.seed, step)) * q_proposal < p_proposal) {
      results.push_back(raw_logprob_result(row, proposal, params.num_top_logprobs));
      continue;
    }
    SamplingDistribution residual = residual_distribution(p, q[i], proposal);
    const float uniform = sampling_uniform(residual_seed(params.seed), step);
    const int32_t replacement = residual.ids.empty() ? draw_from(p, uniform) : draw_from(residual, uniform);
    results.push_back(raw_logprob_result(row, replacement, params.num_top_logprobs));
    results.resize(num_drafts + 1, results.back());  // never read: acceptance stops at the replacement
    break;
  }
  return results;
}

std::vector<SampleResult> sample_verified_batch_on_host(const Batch& batch, std::span<float> logits, int vocab,
                                                        std::span<const SpeculationState* const> states) {
  QINFER_CHECK(states.size() == batch.sequences.size());
  std::vector<bool> judged(batch.sequences.size());  // by rejection sampling: the draft model's proposals
  for (size_t s = 0; s < judged.size(); ++s)
    judged[s] =
        states[s] != nullptr && batch.sequences[s].sample_all_positions && !states[s]->draft_distributions.empty();
  std::vector<SampleResult> results = sample_batch_on_host(batch, logits, vocab, judged);
  size_t row = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const BatchSequence& seq = batch.sequences[s];
    const size_t num_samples = static_cast<size_t>(seq.num_samples());
    const SpeculationState* state = states[s];
    if (judged[s]) {
      QINFER_CHECK(state->drafts.size() + 1 == num_samples &&
                   state->draft_distributions.size() == state->drafts.size());
      const std::vector<SampleResult> judged = rejection_sample(
          logits.subspan(row * static_cast<size_t>(vocab), num_samples * static_cast<size_t>(vocab)), vocab,
          *seq.sampling, seq.history, seq.sample_step, state->drafts, state->draft_distributions);
      std::copy(judged.begin(), judged.end(), results.begin() + static_cast<ptrdiff_t>(row));
    }
    row += num_samples;
  }
  return results;
}

}  // namespace qinfer
