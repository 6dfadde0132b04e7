// Rejection sampling of a draft model's proposals (Leviathan et al., Chen et al., 2023): the target's distribution p
// and the draft's q at each proposed position decide which proposals are kept, so the output follows p exactly
// whatever the draft proposes. docs/ENGINE.md, "Speculative decoding", says how the seeded draws are split.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/speculation.h"

namespace qinfer {

// The seeds of the two draws rejection sampling adds to a request's own (sampling_uniform(seed, j) is output index
// j's accept test and, after all proposals were accepted, its ordinary sample): the draft's proposal of index j draws
// with (draft_proposal_seed(seed), j), a rejected index's replacement with (residual_seed(seed), j). Distinct keys of
// Philox, so the three draws are independent.
uint64_t draft_proposal_seed(uint64_t seed);
uint64_t residual_seed(uint64_t seed);

// One verified sequence: `logits` [d + 1, vocab] are the target's rows after the last token and after each of the d
// `drafts` (constraints already applied), `q` the distributions the drafts were drawn from. Position i is judged with
// the penalties over history.output's first (size - d + i) tokens, as sample_batch_on_host samples it. Returns d + 1
// results in the form the scheduler's acceptance reads: each accepted position carries its proposal; the first
// rejected one carries the replacement drawn from normalize(max(0, p - q)) and the positions after it repeat it; with
// every proposal accepted the last carries the bonus token drawn from p. Logprobs are the target's raw ones.
std::vector<SampleResult> rejection_sample(std::span<const float> logits, int vocab, const SamplingParams& params,
                                           const TokenHistory& history, uint64_t sample_step,
                                           std::span<const int32_t> drafts, std::span<const SamplingDistribution> q);

// A verify step's results from forward_logits rows [num_sampled, vocab] on the host: each sequence whose `states`
// entry holds draft distributions for its proposals judged by rejection_sample, every other row as
// sample_batch_on_host samples it (constraints applied in place on all of them). `states` [batch.sequences.size()]:
// null for a sequence without a draft model's proposals.
std::vector<SampleResult> sample_verified_batch_on_host(const Batch& batch, std::span<float> logits, int vocab,
                                                        std::span<const SpeculationState* const> states);

}  // namespace qinfer
