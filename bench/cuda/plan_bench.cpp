// Host cost of planning one CUDA batch (no GPU needed): `cuda::plan_batch` for a decode step of many sequences with a
// repetition penalty over long prompts, once with each sequence's penalty list kept by the caller (as the engine
// does: the plan views it) and once walked from the history (the plan builds the list). Prints the median of 9 runs of
// 50 plans each. Usage: cuda_plan_bench [SEQUENCES [PROMPT_TOKENS]] (default 64 x 2048).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cuda/batch_plan.h"
#include "backend/sampling.h"

namespace {

using namespace qinfer;

// Median microseconds per plan_batch call over 9 runs of 50 calls.
double median_plan_us(const Batch& batch, int vocab) {
  std::vector<double> runs;
  for (int run = 0; run < 9; ++run) {
    const auto start = std::chrono::steady_clock::now();
    int32_t entries = 0;
    for (int i = 0; i < 50; ++i) entries += cuda::plan_batch(batch, 16, vocab).num_penalties;
    const auto stop = std::chrono::steady_clock::now();
    if (entries == 0) std::fprintf(stderr, "no penalty entries planned\n");
    runs.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / 50);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int sequences = argc > 1 ? std::atoi(argv[1]) : 64, prompt_tokens = argc > 2 ? std::atoi(argv[2]) : 2048;
  constexpr int kVocab = 151936, kBlockSize = 16;
  if (sequences <= 0 || prompt_tokens <= 0) {
    std::fprintf(stderr, "usage: cuda_plan_bench [SEQUENCES [PROMPT_TOKENS]] (both positive)\n");
    return 2;
  }
  SamplingParams params;  // the model card's sampling with a repetition penalty over prompt and output
  params.temperature = 0.7f;
  params.top_k = 20;
  params.top_p = 0.8f;
  params.repetition_penalty = 1.05f;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(sequences)), tables(static_cast<size_t>(sequences));
  std::vector<PenaltyTokens> lists;
  lists.reserve(static_cast<size_t>(sequences));
  for (int s = 0; s < sequences; ++s) {
    for (int i = 0; i < prompt_tokens; ++i) prompts[static_cast<size_t>(s)].push_back(token(rng));
    for (int b = 0; b <= prompt_tokens / kBlockSize; ++b)
      tables[static_cast<size_t>(s)].push_back(s * (prompt_tokens / kBlockSize + 1) + b);
    lists.emplace_back(params, prompts[static_cast<size_t>(s)]);
  }
  Batch batch;
  for (int s = 0; s < sequences; ++s) {
    BatchSequence q;
    q.num_tokens = 1;
    q.num_cached = prompt_tokens;
    q.block_table = tables[static_cast<size_t>(s)];
    q.sample = true;
    q.sampling = &params;
    q.history.prompt = prompts[static_cast<size_t>(s)];
    q.penalty_tokens = &lists[static_cast<size_t>(s)];
    batch.token_ids.push_back(token(rng));
    batch.sequences.push_back(q);
  }
  size_t entries = 0;
  for (const PenaltyTokens& list : lists) entries += list.entries().size();
  const double kept = median_plan_us(batch, kVocab);
  for (BatchSequence& q : batch.sequences) q.penalty_tokens = nullptr;
  const double walked = median_plan_us(batch, kVocab);
  std::printf(
      "plan_batch, %d sequences x %d prompt tokens (%zu distinct penalty entries): %.1f us with the caller's "
      "lists, %.1f us walking the histories\n",
      sequences, prompt_tokens, entries, kept, walked);
  return 0;
}
