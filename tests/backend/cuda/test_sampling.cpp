// The GPU sampler against the host reference sample_token() on random logits with many ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "backend/cuda/batch_plan.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/sampling.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;

struct SamplingCase {
  const char* name;
  SamplingParams params;
  bool flat_logits = false;    // every logit equal: more than 1024 candidates pass the chunk bound of top-k
  bool penalise_top = false;   // the output history holds each row's 30 largest logits (penalised chunk maxima)
  bool nucleus_bound = false;  // most rows must fit the nucleus bound (checked on the host), not only its fallback
  bool twin_peaks = false;     // each row's two largest logits, 3 above the rest, share a chunk of the statistics
};

// Whether the GPU sampler's nucleus bound serves a row without penalties: the two largest processed logits of every
// chunk of 1024, largest first, reach top_p of the row's mass, and at most 1024 lie at or above the last one needed.
bool nucleus_bound_fits(std::span<const float> logits, const SamplingParams& p) {
  std::vector<float> x(logits.size()), maxima;
  for (size_t i = 0; i < x.size(); ++i) x[i] = logits[i] / p.temperature;
  for (size_t c = 0; c < x.size(); c += 1024) {
    std::vector<float> chunk(x.begin() + c, x.begin() + std::min(x.size(), c + 1024));
    std::partial_sort(chunk.begin(), chunk.begin() + 2, chunk.end(), std::greater<>());
    maxima.insert(maxima.end(), chunk.begin(), chunk.begin() + 2);
  }
  std::sort(maxima.rbegin(), maxima.rend());
  const float top = maxima.front();
  double total = 0, mass = 0;
  for (float v : x) total += std::exp(static_cast<double>(v - top));
  for (float m : maxima) {
    mass += std::exp(static_cast<double>(m - top));
    if (mass >= p.top_p * total * 1.001)
      return std::count_if(x.begin(), x.end(), [&](float v) { return v >= m; }) <= 1024;
  }
  return false;
}

std::vector<SamplingCase> sampling_cases() {
  auto make = [](float temperature, int top_k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
  };
  auto penalise = [](SamplingParams p, float repetition, float presence, float frequency) {
    p.repetition_penalty = repetition;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    return p;
  };
  std::vector<SamplingCase> cases = {
      {"greedy", make(0, 0, 1, 0)},
      {"plain", make(1, 0, 1, 0)},
      {"model_card", make(0.7f, 20, 0.8f, 0)},
      {"top_p_only", make(1, 0, 0.9f, 0)},
      {"top_k_only", make(1.2f, 50, 1, 0)},
      {"min_p", make(1.3f, 0, 1, 0.05f)},
      {"everything", make(0.9f, 100, 0.95f, 0.01f)},
  };
  cases.push_back({"penalties", penalise(make(0.8f, 40, 0.9f, 0), 1.3f, 0.7f, 0.4f)});
  cases.push_back({"greedy_repetition", penalise(make(0, 0, 1, 0), 1.5f, 0, 0)});
  // Penalties that raise logits (repetition below 1, negative presence) can lift a chunk's maximum.
  cases.push_back({"penalties_raise", penalise(make(0.9f, 20, 1, 0), 0.8f, -0.5f, 0.1f)});
  for (auto& c : cases) c.params.num_top_logprobs = 5;
  cases.front().params.num_top_logprobs = 20;
  // Greedy without penalties or top logprobs: the argmax comes from the chunk statistics alone.
  cases.push_back({"greedy_fast_path", make(0, 0, 1, 0)});
  cases.push_back({"flat_top_k", make(0.7f, 20, 0.8f, 0), true});
  // Top-p alone over a peaked row (few candidates) and over a flat one (90 % of the vocabulary, ties broken by id).
  cases.push_back({"top_p_peaked", make(0.25f, 0, 0.7f, 0)});
  cases.push_back({"flat_top_p", make(1, 0, 0.9f, 0), true});
  // Penalised rows without top logprobs: greedy from the chunk statistics, top-k under the penalised chunk bound.
  const SamplingCase greedy_penalised{"greedy_penalised", penalise(make(0, 0, 1, 0), 1.5f, 1.0f, 0)};
  cases.push_back(greedy_penalised);
  const SamplingCase presence{"model_card_presence", penalise(make(0.7f, 20, 0.8f, 0), 1, 1.5f, 0)};
  cases.push_back(presence);
  SamplingCase top_penalised = presence;
  top_penalised.name = "top_logits_penalised";
  top_penalised.params.repetition_penalty = 1.3f;
  top_penalised.penalise_top = true;
  cases.push_back(top_penalised);
  SamplingCase greedy_top_penalised = greedy_penalised;
  greedy_top_penalised.name = "greedy_top_logits_penalised";
  greedy_top_penalised.penalise_top = true;
  cases.push_back(greedy_top_penalised);
  // More than 1024 candidates under the bounds: top logprobs and penalised top-k fall back to the whole-row passes.
  SamplingCase flat_logprobs{"flat_top_logprobs", make(0, 0, 1, 0), true};
  flat_logprobs.params.num_top_logprobs = 5;
  cases.push_back(flat_logprobs);
  SamplingCase flat_presence = presence;
  flat_presence.name = "flat_presence";
  flat_presence.flat_logits = true;
  cases.push_back(flat_presence);
  // Top-p alone over peaked rows: the nucleus under the chunk maxima's mass, with min-p, penalties on the largest
  // logits, and top_k equal to the vocabulary (no cut, as the reference reads it).
  cases.push_back({"nucleus_min_p", make(0.3f, 0, 0.9f, 0.05f), false, false, true});
  cases.push_back({"nucleus_top_logits_penalised", penalise(make(0.3f, -1, 0.8f, 0), 1.2f, 1.0f, 0), false, true});
  cases.push_back({"nucleus_top_k_whole_vocabulary", make(0.3f, 151936, 0.95f, 0), false, false, true});
  cases.push_back({"nucleus_twin_peaks", make(0.3f, 0, 0.9f, 0), false, false, true, true});
  return cases;
}

TEST(GpuSampling, MatchesHostReference) {
  SKIP_WITHOUT_GPU();
  const int vocab = 151936, rows_per_case = 12;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::vector<int32_t> block_table = {0};
  for (const SamplingCase& c : sampling_cases()) {
    // Logits rounded to 1/8: many exact ties, which the orders must break by token id.
    std::vector<float> logits(static_cast<size_t>(rows_per_case) * vocab);
    for (auto& x : logits) x = c.flat_logits ? 0.5f : std::round(normal(rng) * 8.0f) / 8.0f;
    if (c.twin_peaks)
      for (int r = 0; r < rows_per_case; ++r) {
        float* row = logits.data() + static_cast<size_t>(r) * vocab;
        const float peak = *std::max_element(row, row + vocab) + 3.0f;
        const int first = 1024 * (r + 3) + 100 + r;  // inside one chunk
        row[first] = peak;
        row[first + 1 + r] = peak;
      }
    std::vector<std::vector<int32_t>> prompts(rows_per_case), outputs(rows_per_case);
    std::uniform_int_distribution<int32_t> token(-5, vocab + 5);  // out-of-vocabulary ids are ignored
    Batch batch;
    for (int r = 0; r < rows_per_case; ++r) {
      for (int i = 0; i < 30; ++i) prompts[r].push_back(token(rng));
      for (int i = 0; i < 20; ++i)
        outputs[r].push_back(i % 3 == 0 ? outputs[r].empty() ? 1 : outputs[r][0] : token(rng));
      if (c.penalise_top) {
        std::vector<int32_t> ids(vocab);
        std::iota(ids.begin(), ids.end(), 0);
        const float* row = logits.data() + static_cast<size_t>(r) * vocab;
        std::partial_sort(ids.begin(), ids.begin() + 30, ids.end(),
                          [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
        outputs[r].assign(ids.begin(), ids.begin() + 30);
      }
      BatchSequence s;
      s.num_tokens = 1;
      s.block_table = block_table;
      s.sample = true;
      s.sampling = &c.params;
      s.history = {prompts[r], outputs[r]};
      s.sample_step = static_cast<uint64_t>(r * 7 + 3);
      batch.sequences.push_back(s);
      batch.token_ids.push_back(0);
    }
    const BatchPlan plan = plan_batch(batch, 16, vocab);
    DeviceArray<float> dlogits(logits), work(logits.size()), probs(logits.size());
    DeviceArray<DeviceSamplingParams> dparams(plan.sampling_params);
    std::vector<PenaltyEntry> penalties = penalty_entries(plan);
    if (penalties.empty()) penalties.push_back({});
    DeviceArray<PenaltyEntry> dpenalties(penalties);
    DeviceArray<SampledToken> results(static_cast<size_t>(rows_per_case));
    DeviceArray<LogitsChunkStats> stats(static_cast<size_t>(rows_per_case * sampling_chunks(vocab)));
    SamplingKernelParams p{dlogits.get(), work.get(),    probs.get(), dparams.get(), dpenalties.get(),
                           results.get(), rows_per_case, vocab,       stats.get()};
    launch_sampling(p, test_stream());
    const auto got = results.download();
    int bound_rows = 0;
    for (int r = 0; r < rows_per_case; ++r) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(r) * vocab, vocab);
      if (c.nucleus_bound && nucleus_bound_fits(row, c.params)) ++bound_rows;
      const SampleResult want = sample_token(row, c.params, batch.sequences[r].history, batch.sequences[r].sample_step);
      EXPECT_EQ(got[r].token, want.token) << c.name << " row " << r;
      EXPECT_NEAR(got[r].logprob, want.logprob, 1e-4) << c.name << " row " << r;
      ASSERT_EQ(static_cast<int>(want.top.size()), c.params.num_top_logprobs);
      for (size_t n = 0; n < want.top.size(); ++n) {
        EXPECT_EQ(got[r].top_tokens[n], want.top[n].token) << c.name << " row " << r << " top " << n;
        EXPECT_NEAR(got[r].top_logprobs[n], want.top[n].logprob, 1e-4) << c.name << " row " << r << " top " << n;
      }
    }
    if (c.nucleus_bound) {
      EXPECT_GE(bound_rows, rows_per_case / 2) << c.name << ": the rows miss the nucleus bound";
    }
  }
}

}  // namespace
}  // namespace qinfer::cuda
