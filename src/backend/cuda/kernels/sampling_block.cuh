// Block-level building blocks of the sampling kernels (sampling.cu): Philox draws matching the host's, total-order
// keys of (value, id), block reductions and scans over one 1024-thread block, a strided row walk with wide loads,
// radix selection over the keys and a bitonic sort of one key per thread.
#pragma once

#include <cfloat>
#include <cstdint>

#include "backend/cuda/kernels/sampling.h"

namespace qinfer::cuda::sampling_block {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kRadixBins = 256;
constexpr int kChunk = 1024;  // vocabulary entries per statistics block (151 936 -> 149 chunks)
constexpr int kStatsThreads = 256;

__host__ __device__ constexpr int chunks_of(int vocab) { return (vocab + kChunk - 1) / kChunk; }

// Philox4x32-10, key = seed, counter = (step, 0): the same bits as sampling_uniform() on the host.
__device__ float philox_uniform(uint64_t seed, uint64_t step) {
  uint32_t c0 = static_cast<uint32_t>(step), c1 = static_cast<uint32_t>(step >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return static_cast<float>(c0 >> 8) * 0x1p-24f;
}

// Total order of candidates: larger value first, lower id first among equal values; every key is distinct.
__device__ __forceinline__ uint64_t order_key(float value, int id) {
  const uint32_t bits = __float_as_uint(value);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (static_cast<uint64_t>(ordered) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int key_id(uint64_t key) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

// The value an order key was made of.
__device__ __forceinline__ float key_value(uint64_t key) {
  const uint32_t ordered = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((ordered & 0x80000000u) ? ordered & 0x7fffffffu : ~ordered);
}

// The two largest order keys seen (0: none).
struct TopTwoKeys {
  unsigned long long first = 0, second = 0;
  __device__ void add(unsigned long long key) {
    if (key > first) {
      second = first;
      first = key;
    } else if (key > second) {
      second = key;
    }
  }
};

__device__ __forceinline__ bool has_active_penalties(const DeviceSamplingParams& sp) {
  return sp.penalty_end > sp.penalty_begin &&
         (sp.repetition_penalty != 1.0f || sp.presence_penalty != 0.0f || sp.frequency_penalty != 0.0f);
}

// Top-p without a top-k cut (top_k off, or the whole vocabulary, as sample_token() reads it): the nucleus bound.
__device__ __forceinline__ bool samples_nucleus_only(const DeviceSamplingParams& sp, int vocab) {
  return sp.temperature > 0.0f && sp.top_p < 1.0f && (sp.top_k <= 0 || sp.top_k >= vocab);
}

// A history token's logit after the penalties, as sample_token() applies them.
__device__ __forceinline__ float penalised_logit(float x, const PenaltyEntry& entry, const DeviceSamplingParams& sp) {
  if (sp.repetition_penalty != 1.0f) x = x > 0 ? x / sp.repetition_penalty : x * sp.repetition_penalty;
  if (entry.output_count > 0 && (sp.presence_penalty != 0.0f || sp.frequency_penalty != 0.0f))
    x -= sp.presence_penalty + sp.frequency_penalty * static_cast<float>(entry.output_count);
  return x;
}

// Every v with fl(v / t) >= bound = fl(kth / t), t > 0, is >= the returned floor: each rounding is within 2^-24
// relative while bound is a finite normal number, so the margin of 2^-20 relative covers both. Values below it can
// skip the division. Without that guarantee (bound zero, subnormal or infinite) there is no floor.
__device__ __forceinline__ float quotient_floor(float kth, float bound) {
  if (!isfinite(bound) || !(fabsf(bound) >= FLT_MIN) || !isfinite(kth)) return -INFINITY;
  return kth - fabsf(kth) * 0x1p-20f - FLT_MIN;
}

struct SharedScratch {
  double doubles[kWarps];
  float floats[kWarps];
  unsigned long long keys[kWarps];
  float warp_bins[kWarps][kRadixBins];  // per-warp histograms: shared-memory atomics contend only within a warp
  double bins[kRadixBins];
  unsigned long long candidates[kThreads];  // small top-k path: keys, then ids
  int count;
  unsigned long long selected_key;
  double mass_above;
  int token;
};

__device__ float block_max(float v, SharedScratch& s) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.floats[threadIdx.x / 32] = v;
  __syncthreads();
  float r = s.floats[0];
  for (int w = 1; w < kWarps; ++w) r = fmaxf(r, s.floats[w]);
  return r;
}

__device__ double block_sum(double v, SharedScratch& s) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.doubles[threadIdx.x / 32] = v;
  __syncthreads();
  double r = 0;
  for (int w = 0; w < kWarps; ++w) r += s.doubles[w];
  return r;
}

__device__ unsigned long long block_max_key(unsigned long long v, SharedScratch& s) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.keys[threadIdx.x / 32] = v;
  __syncthreads();
  unsigned long long r = s.keys[0];
  for (int w = 1; w < kWarps; ++w) r = s.keys[w] > r ? s.keys[w] : r;
  return r;
}

// Exclusive prefix sum over the block in thread order.
__device__ double block_exclusive_scan(double v, SharedScratch& s) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double other = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += other;
  }
  __syncthreads();
  if (lane == 31) s.doubles[warp] = inclusive;
  __syncthreads();
  double warp_offset = 0;
  for (int w = 0; w < warp; ++w) warp_offset += s.doubles[w];
  return warp_offset + inclusive - v;
}

// Calls visit(i, values[i], measures ? measures[i] : 1) for every i < n, each thread a strided share. One block walks
// a whole row several times, so the loads must stay in flight: rows whose length is a multiple of 8 (every row then
// starts 16-byte aligned) go eight elements per thread at a time in two independent 16-byte loads each.
template <typename Visit>
__device__ void for_each_element(const float* values, const float* measures, int n, Visit&& visit) {
  if (n % 8 != 0) {
    for (int i = threadIdx.x; i < n; i += kThreads) visit(i, values[i], measures ? measures[i] : 1.0f);
    return;
  }
  const float4* values4 = reinterpret_cast<const float4*>(values);
  const float4* measures4 = reinterpret_cast<const float4*>(measures);
  const float4 ones = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
  for (int pair = threadIdx.x; pair < n / 8; pair += kThreads) {
    const float4 v0 = values4[2 * pair], v1 = values4[2 * pair + 1];
    const float4 m0 = measures ? measures4[2 * pair] : ones, m1 = measures ? measures4[2 * pair + 1] : ones;
    const int i = 8 * pair;
    visit(i, v0.x, m0.x);
    visit(i + 1, v0.y, m0.y);
    visit(i + 2, v0.z, m0.z);
    visit(i + 3, v0.w, m0.w);
    visit(i + 4, v1.x, m1.x);
    visit(i + 5, v1.y, m1.y);
    visit(i + 6, v1.z, m1.z);
    visit(i + 7, v1.w, m1.w);
  }
}

// The largest key T such that the measure (count, or probability mass when by_mass) of the elements with
// floor_key <= key and key >= T reaches `target`: radix descent over the 64-bit key, 8 bits at a time.
__device__ uint64_t radix_select(const float* work, const float* probs, int vocab, uint64_t floor_key, double target,
                                 bool by_mass, SharedScratch& s) {
  uint64_t prefix = 0, prefix_mask = 0;
  if (threadIdx.x == 0) s.mass_above = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kWarps * kRadixBins; b += kThreads) (&s.warp_bins[0][0])[b] = 0;
    __syncthreads();
    // Each thread sums a run of equal digits in registers and adds it to the bin when the digit changes: the first
    // passes put most of the vocabulary in one or two bins, where one shared atomic per element serialises.
    float* warp_bins = s.warp_bins[threadIdx.x / 32];
    int run_digit = -1;
    float run_measure = 0;
    auto visit = [&](int i, float value, float measure) {
      const uint64_t key = order_key(value, i);
      if (key < floor_key || (key & prefix_mask) != prefix) return;
      const int digit = static_cast<int>(key >> shift) & 0xff;
      if (digit != run_digit) {
        if (run_digit >= 0) atomicAdd(&warp_bins[run_digit], run_measure);
        run_digit = digit;
        run_measure = 0;
      }
      run_measure += measure;
    };
    for_each_element(work, by_mass ? probs : nullptr, vocab, visit);
    if (run_digit >= 0) atomicAdd(&warp_bins[run_digit], run_measure);
    __syncthreads();
    for (int b = threadIdx.x; b < kRadixBins; b += kThreads) {
      double total = 0;
      for (int w = 0; w < kWarps; ++w) total += s.warp_bins[w][b];
      s.bins[b] = total;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double cumulative = s.mass_above;
      int chosen = -1, lowest_nonempty = 0;
      for (int b = kRadixBins - 1; b >= 0; --b) {
        if (s.bins[b] == 0) continue;
        lowest_nonempty = b;
        if (cumulative + s.bins[b] >= target) {
          chosen = b;
          break;
        }
        cumulative += s.bins[b];
      }
      if (chosen < 0) chosen = lowest_nonempty;  // rounding left the target out of reach: take everything
      s.mass_above = cumulative;
      s.selected_key = prefix | (static_cast<uint64_t>(chosen) << shift);
    }
    __syncthreads();
    prefix = s.selected_key;
    prefix_mask |= static_cast<uint64_t>(0xff) << shift;
  }
  return prefix;
}

// Sorts kThreads keys in shared memory ascending (bitonic network, one key per thread).
__device__ void bitonic_sort_ascending(unsigned long long* keys) {
  __syncthreads();
  for (int size = 2; size <= kThreads; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      const int i = threadIdx.x, j = i ^ stride;
      if (j > i) {
        const unsigned long long a = keys[i], b = keys[j];
        if ((a > b) == ((i & size) == 0)) {
          keys[i] = b;
          keys[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace qinfer::cuda::sampling_block
