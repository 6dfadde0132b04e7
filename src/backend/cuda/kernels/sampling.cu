#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/kernels/sampling_block.cuh"

namespace qinfer::cuda {

namespace {

using namespace sampling_block;

// Second half of the bounded paths: s.candidates holds ~key of s.count <= kThreads candidates that include the top_k
// largest processed logits, or the top-p nucleus (padding ~0). They are sorted, cut to top_k, and thread 0 then
// follows sample_token() step by step (double exp, same summation orders), so the draw matches the reference exactly.
// `row_total` > 0: the nucleus-only path's mass of the whole row (from the chunk statistics, so it matches the
// reference's sum up to its summation order); else the top-p mass is that of the top_k kept, as the reference sums it.
// work[] must hold the processed logit of every candidate.
__device__ int sample_from_candidates(const float* work, const DeviceSamplingParams& sp, float top, double row_total,
                                      SharedScratch& s) {
  bitonic_sort_ascending(s.candidates);
  const int k = sp.top_k > 0 ? min(s.count, sp.top_k) : s.count;
  __syncthreads();  // everyone has read the count before thread 0 reuses it
  // Top-p prefix in probability order (thread 0), then min-p; survivors re-sorted by id for the inverse CDF.
  if (threadIdx.x == 0) {
    int kept = k;
    if (sp.top_p < 1.0f) {
      double total = row_total;
      if (!(row_total > 0))
        for (int n = 0; n < k; ++n) total += exp(static_cast<double>(work[key_id(~s.candidates[n])] - top));
      double cumulative = 0;
      int n = 0;
      while (n < kept) {
        cumulative += exp(static_cast<double>(work[key_id(~s.candidates[n++])] - top)) / total;
        if (cumulative >= sp.top_p) break;
      }
      kept = n;
    }
    s.count = kept;
  }
  __syncthreads();
  const int kept = s.count;
  unsigned long long id_key = ~0ull;
  if (static_cast<int>(threadIdx.x) < kept) {
    const int id = key_id(~s.candidates[threadIdx.x]);
    const double prob = exp(static_cast<double>(work[id] - top));
    if (sp.min_p <= 0.0f || prob >= static_cast<double>(sp.min_p)) id_key = static_cast<unsigned long long>(id);
  }
  __syncthreads();
  s.candidates[threadIdx.x] = id_key;
  bitonic_sort_ascending(s.candidates);
  if (threadIdx.x == 0) {
    int n = 0;
    double mass = 0;
    for (; n < kThreads && s.candidates[n] != ~0ull; ++n) mass += exp(static_cast<double>(work[s.candidates[n]] - top));
    const double target = static_cast<double>(philox_uniform(sp.seed, sp.step)) * mass;
    int token = static_cast<int>(s.candidates[n - 1]);
    double cumulative = 0;
    for (int c = 0; c < n; ++c) {
      cumulative += exp(static_cast<double>(work[s.candidates[c]] - top));
      if (cumulative > target) {
        token = static_cast<int>(s.candidates[c]);
        break;
      }
    }
    s.token = token;
  }
  __syncthreads();
  return s.token;
}

// top_k <= kThreads over the whole processed row: the exact k-th key by radix selection, then the draw.
__device__ int sample_small_top_k(const float* work, int vocab, const DeviceSamplingParams& sp, float top,
                                  SharedScratch& s) {
  const uint64_t threshold = radix_select(work, nullptr, vocab, 0, static_cast<double>(sp.top_k), false, s);
  if (threadIdx.x == 0) s.count = 0;
  s.candidates[threadIdx.x] = ~0ull;  // padding sorts last
  __syncthreads();
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const uint64_t key = order_key(work[i], i);
    if (key >= threshold) s.candidates[atomicAdd(&s.count, 1)] = ~key;  // ascending ~key = descending key
  }
  return sample_from_candidates(work, sp, top, 0.0, s);
}

// Sorts the chunks' keys of `value` descending into s.candidates (padding ~0 last).
template <typename Value>
__device__ void sort_chunks_descending(const LogitsChunkStats* stats, int chunks, Value&& value, SharedScratch& s) {
  s.candidates[threadIdx.x] =
      static_cast<int>(threadIdx.x) < chunks ? ~order_key(value(stats[threadIdx.x]), threadIdx.x) : ~0ull;
  bitonic_sort_ascending(s.candidates);
}

// Empties s.candidates and s.count for a gather, once everyone has read them.
__device__ void reset_candidates(SharedScratch& s) {
  __syncthreads();
  if (threadIdx.x == 0) s.count = 0;
  s.candidates[threadIdx.x] = ~0ull;  // padding sorts last
  __syncthreads();
}

// The n-th largest chunk value (n <= chunks), with s.candidates and s.count emptied for a gather.
template <typename Value>
__device__ float nth_largest_chunk_value(const LogitsChunkStats* stats, int chunks, int n, Value&& value,
                                         SharedScratch& s) {
  sort_chunks_descending(stats, chunks, value, s);
  const float nth = value(stats[key_id(~s.candidates[n - 1])]);
  reset_candidates(s);
  return nth;
}

// Gathers into s.candidates the processed logits x = v / temperature >= bound = kth / temperature of `source` (the raw
// logits, or the penalised ones in `work`), writing x to work[]. False when more than kThreads pass.
__device__ bool gather_quotients_at_or_above(const float* source, float* work, int vocab, float kth,
                                             const DeviceSamplingParams& sp, SharedScratch& s) {
  const float bound = kth / sp.temperature, floor = quotient_floor(kth, bound);
  for_each_element(source, nullptr, vocab, [&](int i, float v, float) {
    if (!(v >= floor)) return;
    const float x = v / sp.temperature;
    if (x >= bound) {
      const int slot = atomicAdd(&s.count, 1);
      if (slot < kThreads) s.candidates[slot] = ~order_key(x, i);
      work[i] = x;
    }
  });
  __syncthreads();
  return s.count <= kThreads;
}

// top_k <= number of chunks: the k-th largest chunk maximum T of the penalised logits bounds the k-th largest of them
// from below (k chunks each hold one >= T), so the values with x / temperature >= T / temperature (rounding is
// monotonic) include the top k. One pass over `source` gathers them instead of eight radix passes over the row.
// Returns -1 when more than kThreads values pass the bound (the caller then takes the radix path).
__device__ int sample_top_k_within_chunk_bound(const float* source, float* work, int vocab,
                                               const LogitsChunkStats* stats, int chunks,
                                               const DeviceSamplingParams& sp, float top, SharedScratch& s) {
  const float kth = nth_largest_chunk_value(
      stats, chunks, sp.top_k, [](const LogitsChunkStats& c) { return c.penalised_max; }, s);
  if (!gather_quotients_at_or_above(source, work, vocab, kth, sp, s)) return -1;
  return sample_from_candidates(work, sp, top, 0.0, s);
}

// Top-p without top-k: the row's mass relative to `top` comes from the chunk statistics; the two largest penalised
// logits of every chunk are distinct tokens, so once the largest of them add up to top_p of the row (with a margin for
// the summation order), every logit of the nucleus is at or above the last of them. One pass gathers those (two per
// chunk, so that two outliers in one chunk do not hide one). Returns -1 when they do not reach that mass or more
// than kThreads values pass (the caller then takes the radix path). Needs 2 * chunks <= kThreads.
__device__ int sample_nucleus_within_chunk_bound(const float* source, float* work, int vocab,
                                                 const LogitsChunkStats* stats, int chunks,
                                                 const DeviceSamplingParams& sp, float top, SharedScratch& s) {
  double part = 0;
  for (int c = threadIdx.x; c < chunks; c += kThreads)
    part += stats[c].scaled_sum_exp * exp(static_cast<double>(stats[c].penalised_max / sp.temperature - top));
  const double total = block_sum(part, s);
  const int slot = threadIdx.x;
  const unsigned long long key = slot < chunks       ? stats[slot].penalised_best
                                 : slot < 2 * chunks ? stats[slot - chunks].penalised_second
                                                     : 0ull;
  s.candidates[slot] = ~key;  // no key (0) sorts last
  bitonic_sort_ascending(s.candidates);
  const bool holds_key = s.candidates[slot] != ~0ull;
  const double own = holds_key ? exp(static_cast<double>(key_value(~s.candidates[slot]) / sp.temperature - top)) : 0.0;
  const double before = block_exclusive_scan(own, s);
  const double target = static_cast<double>(sp.top_p) * total * (1.0 + 0x1p-20);
  if (threadIdx.x == 0) s.token = -1;
  __syncthreads();
  if (holds_key && before < target && before + own >= target) s.token = slot;
  __syncthreads();
  const int last = s.token;
  const float kth = last >= 0 ? key_value(~s.candidates[last]) : 0.0f;
  reset_candidates(s);
  if (last < 0 || !gather_quotients_at_or_above(source, work, vocab, kth, sp, s)) return -1;
  return sample_from_candidates(work, sp, top, total, s);
}

// The n largest raw logits (n <= number of chunks) into result.top_*: the n-th largest chunk maximum bounds them from
// below, so one pass gathers the candidates. False when more than kThreads logits pass the bound.
__device__ bool top_logprobs_within_chunk_bound(const float* logits, int vocab, const LogitsChunkStats* stats,
                                                int chunks, int n, float log_norm, SampledToken& result,
                                                SharedScratch& s) {
  const float bound = nth_largest_chunk_value(
      stats, chunks, n, [](const LogitsChunkStats& c) { return c.max; }, s);
  for_each_element(logits, nullptr, vocab, [&](int i, float x, float) {
    if (x >= bound) {
      const int slot = atomicAdd(&s.count, 1);
      if (slot < kThreads) s.candidates[slot] = ~order_key(x, i);
    }
  });
  __syncthreads();
  if (s.count > kThreads) return false;
  bitonic_sort_ascending(s.candidates);
  if (static_cast<int>(threadIdx.x) < n) {
    const int id = key_id(~s.candidates[threadIdx.x]);
    result.top_tokens[threadIdx.x] = id;
    result.top_logprobs[threadIdx.x] = logits[id] - log_norm;
  }
  return true;
}

// Grid (chunks, rows): apply_logit_constraints() of backend/sampling.h on one chunk of one constrained row: tokens
// outside its mask to -inf, then its logit_bias entries that fall into the chunk added (entries are distinct tokens).
__global__ void __launch_bounds__(kStatsThreads) logit_constraints_kernel(SamplingKernelParams p) {
  allow_dependents();
  wait_for_producer();
  const int row = blockIdx.y, begin = blockIdx.x * kChunk, end = min(p.vocab, begin + kChunk);
  const DeviceSamplingParams sp = p.params[row];
  float* logits = p.logits + static_cast<int64_t>(row) * p.vocab;
  if (sp.mask_index >= 0) {
    const uint32_t* mask = p.masks + static_cast<int64_t>(sp.mask_index) * ((p.vocab + 31) / 32);
    for (int i = begin + threadIdx.x; i < end; i += kStatsThreads)
      if (!((mask[i / 32] >> (i % 32)) & 1u)) logits[i] = -INFINITY;
  }
  if (sp.bias_end > sp.bias_begin) {
    __syncthreads();  // the masked values are written before biases add to them
    for (int e = sp.bias_begin + threadIdx.x; e < sp.bias_end; e += kStatsThreads) {
      const DeviceLogitBias b = p.biases[e];
      if (b.token >= begin && b.token < end) logits[b.token] += b.bias;
    }
  }
}

// Grid (chunks, rows): of one chunk of one row, the raw logits' max, sum of exp(x - max) and argmax key, and the
// penalised logits' max and argmax key. A row with penalties gets its chunk's penalised logits written to `work`.
__global__ void __launch_bounds__(kStatsThreads) logits_chunk_stats_kernel(SamplingKernelParams p) {
  constexpr int kStatsWarps = kStatsThreads / 32;
  __shared__ float maxima[kStatsWarps];
  __shared__ double sums[kStatsWarps], scaled_sums[kStatsWarps];
  __shared__ unsigned long long keys[kStatsWarps], second_keys[kStatsWarps];
  __shared__ float penalised[kChunk];
  allow_dependents();
  wait_for_producer();
  const int row = blockIdx.y, begin = blockIdx.x * kChunk, end = min(p.vocab, begin + kChunk);
  const float* logits = p.logits + static_cast<int64_t>(row) * p.vocab;
  const DeviceSamplingParams sp = p.params[row];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Only rows that sample top-p alone use the second largest key (the nucleus bound); the others keep the cheaper
  // single-key passes (measured: tracking two keys in every row doubled the statistics time of 64 greedy rows).
  const bool nucleus = samples_nucleus_only(sp, p.vocab);
  auto add_key = [&](TopTwoKeys& top, unsigned long long key) {
    if (nucleus)
      top.add(key);
    else
      top.first = key > top.first ? key : top.first;
  };
  // Block-wide max and largest keys of every thread's (max, keys). A second call must follow a barrier after the
  // first one's reads.
  auto block_max_and_keys = [&](float local_max, TopTwoKeys top, float& block_max_out, TopTwoKeys& block_top_out) {
    for (int o = 16; o > 0; o >>= 1) {
      local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, o));
      const unsigned long long other_first = __shfl_xor_sync(0xffffffffu, top.first, o);
      const unsigned long long other_second = nucleus ? __shfl_xor_sync(0xffffffffu, top.second, o) : 0ull;
      add_key(top, other_first);
      if (nucleus) top.add(other_second);
    }
    if (lane == 0) maxima[warp] = local_max, keys[warp] = top.first, second_keys[warp] = top.second;
    __syncthreads();
    block_max_out = maxima[0];
    block_top_out = TopTwoKeys{};
    for (int w = 0; w < kStatsWarps; ++w) {
      block_max_out = fmaxf(block_max_out, maxima[w]);
      add_key(block_top_out, keys[w]);
      if (nucleus) block_top_out.add(second_keys[w]);
    }
  };
  float local_max = -INFINITY;
  TopTwoKeys top;
  for (int i = begin + threadIdx.x; i < end; i += kStatsThreads) {
    const float x = logits[i];
    local_max = fmaxf(local_max, x);
    add_key(top, order_key(x, i));
  }
  LogitsChunkStats stats;
  TopTwoKeys chunk_top;
  block_max_and_keys(local_max, top, stats.max, chunk_top);
  stats.best = chunk_top.first;
  double local_sum = 0;
  // A token masked out by a constraint is -inf; a chunk with every token masked has max -inf too, where
  // exp(-inf - -inf) would be NaN: such tokens add nothing.
  for (int i = begin + threadIdx.x; i < end; i += kStatsThreads)
    local_sum += logits[i] == -INFINITY ? 0.0f : expf(logits[i] - stats.max);
  for (int o = 16; o > 0; o >>= 1) local_sum += __shfl_xor_sync(0xffffffffu, local_sum, o);
  if (lane == 0) sums[warp] = local_sum;
  stats.penalised_max = stats.max;
  stats.penalised_best = stats.best;
  stats.penalised_second = chunk_top.second;
  if (has_active_penalties(sp)) {
    // The row's history entries that fall into this chunk, applied to a shared copy (entries are distinct tokens).
    for (int i = begin + threadIdx.x; i < end; i += kStatsThreads) penalised[i - begin] = logits[i];
    __syncthreads();  // also: everyone has read the first block_max_and_keys's results
    for (int e = sp.penalty_begin + threadIdx.x; e < sp.penalty_end; e += kStatsThreads) {
      const PenaltyEntry entry = p.penalties[e];
      if (entry.token >= begin && entry.token < end)
        penalised[entry.token - begin] = penalised_logit(penalised[entry.token - begin], entry, sp);
    }
    __syncthreads();
    float* work = p.work + static_cast<int64_t>(row) * p.vocab;
    local_max = -INFINITY;
    top = TopTwoKeys{};
    for (int i = begin + threadIdx.x; i < end; i += kStatsThreads) {
      const float x = penalised[i - begin];
      work[i] = x;
      local_max = fmaxf(local_max, x);
      add_key(top, order_key(x, i));
    }
    block_max_and_keys(local_max, top, stats.penalised_max, chunk_top);
    stats.penalised_best = chunk_top.first;
    stats.penalised_second = chunk_top.second;
  }
  if (nucleus) {
    // As sample_token() computes a probability: x - top in float, then exp in double (top here the chunk's).
    const float scaled_max = stats.penalised_max / sp.temperature;
    const bool penalised_row = has_active_penalties(sp);
    double local_scaled_sum = 0;
    for (int i = begin + threadIdx.x; i < end; i += kStatsThreads) {
      const float v = penalised_row ? penalised[i - begin] : logits[i];
      local_scaled_sum += v == -INFINITY ? 0.0 : exp(static_cast<double>(v / sp.temperature - scaled_max));
    }
    for (int o = 16; o > 0; o >>= 1) local_scaled_sum += __shfl_xor_sync(0xffffffffu, local_scaled_sum, o);
    if (lane == 0) scaled_sums[warp] = local_scaled_sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 0; w < kStatsWarps; ++w) {
      stats.sum_exp += sums[w];
      if (nucleus) stats.scaled_sum_exp += scaled_sums[w];
    }
    p.chunk_stats[static_cast<int64_t>(row) * gridDim.x + blockIdx.x] = stats;
  }
}

// Penalties, temperature, top-k/p, min-p and the draw over the whole row (work[] gets the processed logits).
__device__ int sample_full_row(const SamplingKernelParams& p, const DeviceSamplingParams& sp, const float* logits,
                               float* work, float* probs, SharedScratch& shared) {
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) work[i] = logits[i];
  // Penalties (entries are distinct tokens, so no two threads touch one logit).
  __syncthreads();
  for (int e = sp.penalty_begin + threadIdx.x; e < sp.penalty_end; e += kThreads) {
    const PenaltyEntry entry = p.penalties[e];
    work[entry.token] = penalised_logit(work[entry.token], entry, sp);
  }
  __syncthreads();

  int token;
  if (sp.temperature <= 0.0f) {
    unsigned long long best = 0;
    for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
      const unsigned long long key = order_key(work[i], i);
      best = key > best ? key : best;
    }
    token = key_id(block_max_key(best, shared));
  } else {
    float local_max = -INFINITY;
    for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
      const float x = work[i] / sp.temperature;
      work[i] = x;
      local_max = fmaxf(local_max, x);
    }
    const float top = block_max(local_max, shared);
    if (sp.top_k > 0 && sp.top_k <= kThreads) {
      token = sample_small_top_k(work, p.vocab, sp, top, shared);
    } else {
      // Large or no top-k: thresholds by radix selection over the whole vocabulary, draw by a block-wide scan.
      uint64_t threshold = 0;  // candidates: order_key >= threshold
      if (sp.top_k > 0 && sp.top_k < p.vocab)
        threshold = radix_select(work, probs, p.vocab, 0, static_cast<double>(sp.top_k), false, shared);
      if (sp.top_p < 1.0f) {
        double kept_mass = 0;
        for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
          const float prob = expf(work[i] - top);
          probs[i] = prob;
          if (order_key(work[i], i) >= threshold) kept_mass += prob;
        }
        const double total = block_sum(kept_mass, shared);
        threshold = radix_select(work, probs, p.vocab, threshold, static_cast<double>(sp.top_p) * total, true, shared);
      }

      // Inverse CDF over the candidates in ascending id order: each thread owns a contiguous range of ids.
      const int chunk = (p.vocab + kThreads - 1) / kThreads;
      const int begin = min(p.vocab, static_cast<int>(threadIdx.x) * chunk), end = min(p.vocab, begin + chunk);
      auto candidate_mass = [&](int i) -> double {
        if (order_key(work[i], i) < threshold) return 0.0;
        const double prob = expf(work[i] - top);
        return sp.min_p > 0.0f && prob < static_cast<double>(sp.min_p) ? 0.0 : prob;
      };
      double own = 0;
      unsigned long long last_candidate = 0;
      for (int i = begin; i < end; ++i) {
        const double m = candidate_mass(i);
        own += m;
        if (m > 0) last_candidate = static_cast<unsigned long long>(i);
      }
      const double before = block_exclusive_scan(own, shared);
      const double total = block_sum(own, shared);
      const int fallback = static_cast<int>(block_max_key(last_candidate, shared));
      if (threadIdx.x == 0) shared.token = fallback;
      __syncthreads();
      const double target = static_cast<double>(philox_uniform(sp.seed, sp.step)) * total;
      if (before <= target && before + own > target) {
        double cumulative = before;
        for (int i = begin; i < end; ++i) {
          cumulative += candidate_mass(i);
          if (cumulative > target) {
            shared.token = i;
            break;
          }
        }
      }
      __syncthreads();
      token = shared.token;
    }
  }
  return token;
}

__global__ void __launch_bounds__(kThreads) sampling_kernel(SamplingKernelParams p) {
  __shared__ SharedScratch shared;
  const int row = blockIdx.x;
  const DeviceSamplingParams sp = p.params[row];
  const float* logits = p.logits + static_cast<int64_t>(row) * p.vocab;
  float* work = p.work + static_cast<int64_t>(row) * p.vocab;
  float* probs = p.probs + static_cast<int64_t>(row) * p.vocab;
  SampledToken& result = p.results[row];
  allow_dependents();
  wait_for_producer();

  // Log-softmax normaliser of the raw logits, and the max and argmax of the penalised ones (the raw ones in rows
  // without penalties), merged from the chunk statistics.
  const int chunks = chunks_of(p.vocab);
  const LogitsChunkStats* stats = p.chunk_stats + static_cast<int64_t>(row) * chunks;
  float chunk_max = -INFINITY;
  unsigned long long chunk_best = 0;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    chunk_max = fmaxf(chunk_max, stats[c].max);
    chunk_best = stats[c].penalised_best > chunk_best ? stats[c].penalised_best : chunk_best;
  }
  const float max_logit = block_max(chunk_max, shared);
  const unsigned long long best = block_max_key(chunk_best, shared);
  double chunk_exp = 0;
  for (int c = threadIdx.x; c < chunks; c += kThreads)
    chunk_exp += stats[c].sum_exp * exp(static_cast<double>(stats[c].max - max_logit));
  const float log_norm = max_logit + static_cast<float>(log(block_sum(chunk_exp, shared)));

  if (sp.temperature <= 0.0f && sp.num_top_logprobs == 0) {
    if (threadIdx.x == 0) {
      const int token = key_id(best);
      result.token = token;
      result.logprob = logits[token] - log_norm;
    }
    return;
  }
  const bool bounds_apply = chunks <= kThreads;
  int token = -1;
  if (sp.temperature <= 0.0f)
    token = key_id(best);
  else if (const bool top_k_bound = sp.top_k > 0 && sp.top_k <= chunks;
           bounds_apply && (top_k_bound || (samples_nucleus_only(sp, p.vocab) && 2 * chunks <= kThreads))) {
    float chunk_penalised_max = -INFINITY;
    for (int c = threadIdx.x; c < chunks; c += kThreads)
      chunk_penalised_max = fmaxf(chunk_penalised_max, stats[c].penalised_max);
    const float top = block_max(chunk_penalised_max, shared) / sp.temperature;
    const float* source = has_active_penalties(sp) ? work : logits;
    token = top_k_bound ? sample_top_k_within_chunk_bound(source, work, p.vocab, stats, chunks, sp, top, shared)
                        : sample_nucleus_within_chunk_bound(source, work, p.vocab, stats, chunks, sp, top, shared);
  }
  if (token < 0) token = sample_full_row(p, sp, logits, work, probs, shared);

  // Top logprobs of the raw logits: gathered under the chunk bound, else by repeated block argmax below the previous
  // key.
  if (sp.num_top_logprobs > 0 && !(bounds_apply && sp.num_top_logprobs <= chunks &&
                                   top_logprobs_within_chunk_bound(logits, p.vocab, stats, chunks, sp.num_top_logprobs,
                                                                   log_norm, result, shared))) {
    unsigned long long previous = ~0ull;
    for (int n = 0; n < sp.num_top_logprobs; ++n) {
      unsigned long long top_key = 0;
      for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
        const unsigned long long key = order_key(logits[i], i);
        if (key < previous && key > top_key) top_key = key;
      }
      previous = block_max_key(top_key, shared);
      if (threadIdx.x == 0) {
        const int id = key_id(previous);
        result.top_tokens[n] = id;
        result.top_logprobs[n] = logits[id] - log_norm;
      }
    }
  }
  if (threadIdx.x == 0) {
    result.token = token;
    result.logprob = logits[token] - log_norm;
  }
}

}  // namespace

int sampling_chunks(int vocab) { return chunks_of(vocab); }

void launch_sampling(const SamplingKernelParams& params, const KernelStream& stream) {
  if (params.num_rows == 0) return;
  QINFER_CHECK(params.chunk_stats != nullptr);
  if (params.constrained)
    launch_dependent(logit_constraints_kernel,
                     dim3(static_cast<unsigned>(sampling_chunks(params.vocab)), static_cast<unsigned>(params.num_rows)),
                     kStatsThreads, 0, stream, params);
  launch_dependent(logits_chunk_stats_kernel,
                   dim3(static_cast<unsigned>(sampling_chunks(params.vocab)), static_cast<unsigned>(params.num_rows)),
                   kStatsThreads, 0, stream, params);
  launch_dependent(sampling_kernel, params.num_rows, kThreads, 0, stream, params);
}

}  // namespace qinfer::cuda
