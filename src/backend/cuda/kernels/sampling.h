// Sampling on the GPU, one block per sequence: penalties, temperature, top-k, top-p, min-p, seeded inverse-CDF draw,
// the chosen token's logprob and the top logprobs. Computes what backend/sampling.h's sample_token() defines; only the
// results come back to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

constexpr int kMaxTopLogprobs = 20;

struct DeviceSamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int num_top_logprobs = 0;
  uint64_t seed = 0;
  uint64_t step = 0;
  int32_t penalty_begin = 0;  // range of this row's entries in `penalties`
  int32_t penalty_end = 0;
  int32_t mask_index = -1;  // constrained rows: this row's allowed-token mask is masks[mask_index]; -1: none
  int32_t bias_begin = 0;   // range of this row's entries in `biases`
  int32_t bias_end = 0;
};

// An OpenAI logit_bias entry (backend/sampling.h LogitBias's layout).
struct DeviceLogitBias {
  int32_t token = 0;
  float bias = 0;
};

// A token of the history: repetition penalty applies to every entry, presence/frequency when output_count > 0.
struct PenaltyEntry {
  int32_t token = 0;
  int32_t output_count = 0;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0;
  int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// Per-chunk statistics of one row's logits, computed by many blocks before the per-row sampling block runs: of the
// raw logits, and of the penalised ones (equal to the raw ones in rows without penalties).
struct LogitsChunkStats {
  float max = 0;                            // largest raw logit of the chunk
  double sum_exp = 0;                       // sum of exp(logit - max) over the chunk
  unsigned long long best = 0;              // raw argmax as an order key (largest value, lowest id first)
  float penalised_max = 0;                  // largest logit after penalties
  unsigned long long penalised_best = 0;    // argmax after penalties, as an order key
  unsigned long long penalised_second = 0;  // the second largest after penalties, as an order key (0: none)
  double scaled_sum_exp = 0;  // rows sampling top-p alone: sum of exp(x - penalised_max / T) over x = penalised / T
};

struct SamplingKernelParams {
  float* logits = nullptr;  // [num_rows, vocab]; rows with constraints get them applied in place first
  float* work = nullptr;    // [num_rows, vocab] scratch: penalised, then processed logits
  float* probs = nullptr;   // [num_rows, vocab] scratch: exp(work - max)
  const DeviceSamplingParams* params = nullptr;  // [num_rows]
  const PenaltyEntry* penalties = nullptr;       // [total entries]
  SampledToken* results = nullptr;               // [num_rows]
  int num_rows = 0;
  int vocab = 0;
  LogitsChunkStats* chunk_stats = nullptr;  // [num_rows, sampling_chunks(vocab)] scratch
  // Constraints (apply_logit_constraints() of backend/sampling.h): when any row has some, a first kernel applies them
  // to that row's logits.
  bool constrained = false;
  const uint32_t* masks = nullptr;          // [number of masked rows, (vocab + 31) / 32] allowed-token bitmasks
  const DeviceLogitBias* biases = nullptr;  // [total entries]
};

// Chunks each row's vocabulary is split into for the statistics pass.
int sampling_chunks(int vocab);

// With constraints, first a kernel that applies them to the constrained rows' logits. Then two kernels: chunk
// statistics of every row over many blocks (the log-softmax normaliser and the greedy argmax come from them; rows with
// penalties get their penalised logits in `work`), then one block per row for what needs the whole row (top-k/p, the
// draw, top logprobs). Greedy rows without top logprobs are done after the first kernel's merge; top-k within the
// number of chunks and top logprobs gather only the logits that the chunk maxima bound.
void launch_sampling(const SamplingKernelParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
