// A random paged KV cache (bf16, and the fp8 cache of the same values) with its block tables, and the float64
// attention reference over it, shared by the decode and prefill attention tests; a prefill batch on the device.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "backend/cuda/kernels/prefill_attention.h"
#include "gpu_test_util.h"
#include "util/fp8.h"

namespace qinfer::cuda::testing {

struct AttentionShape {
  int head_dim, num_heads, num_kv_heads;
};

// A random paged cache and block tables: each sequence gets the blocks its context needs, scattered over the pool;
// table entries past that point at block 0.
struct PagedCache {
  AttentionShape shape;
  int block_size;
  int num_blocks;
  std::vector<__nv_bfloat16> k, v;  // [num_blocks, num_kv_heads, block_size, head_dim]
  std::vector<int32_t> tables;      // [num_sequences, stride]
  int stride;

  PagedCache(AttentionShape s, const std::vector<int>& context_lens, std::mt19937& rng, int block_size_ = 16)
      : shape(s), block_size(block_size_) {
    stride = 0;
    int needed = 0;
    for (int len : context_lens) {
      stride = std::max(stride, (len + block_size - 1) / block_size);
      needed += (len + block_size - 1) / block_size;
    }
    num_blocks = needed + 3;
    const size_t elements = static_cast<size_t>(num_blocks) * s.num_kv_heads * block_size * s.head_dim;
    k = random_bf16(elements, rng);
    v = random_bf16(elements, rng);
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    tables.assign(static_cast<size_t>(stride) * context_lens.size(), 0);
    size_t next_id = 0;
    for (size_t seq = 0; seq < context_lens.size(); ++seq)
      for (int b = 0; b < (context_lens[seq] + block_size - 1) / block_size; ++b)
        tables[seq * static_cast<size_t>(stride) + static_cast<size_t>(b)] = ids[next_id++];
  }
  // Offset of [head_dim] of token `token` of a sequence (block-table row `seq`) for one KV head.
  size_t row_offset(int seq, int token, int kv_head) const {
    const int64_t block = tables[static_cast<size_t>(seq) * stride + token / block_size];
    return static_cast<size_t>(((block * shape.num_kv_heads + kv_head) * block_size + token % block_size) *
                               shape.head_dim);
  }
  template <typename T>
  const T* row(const std::vector<T>& cache, int seq, int token, int kv_head) const {
    return &cache[row_offset(seq, token, kv_head)];
  }

  // The fp8 cache of the same values: every (block, KV head, slot) vector of k and v through the host quantiser
  // (util/fp8.h), and what it dequantises to, float(byte) * scale, in the layout of k and v.
  std::vector<uint8_t> k_fp8, v_fp8;      // [num_blocks, num_kv_heads, block_size, head_dim]
  std::vector<float> k_scales, v_scales;  // [num_blocks, num_kv_heads, block_size]
  std::vector<float> k_dequantized, v_dequantized;
  void quantize_fp8() {
    const auto quantize = [&](const std::vector<__nv_bfloat16>& values, std::vector<uint8_t>& bytes,
                              std::vector<float>& scales, std::vector<float>& dequantized) {
      const size_t d = static_cast<size_t>(shape.head_dim);
      bytes.resize(values.size());
      scales.resize(values.size() / d);
      dequantized.resize(values.size());
      std::vector<float> x(d);
      for (size_t vector = 0; vector < scales.size(); ++vector) {
        for (size_t i = 0; i < d; ++i) x[i] = to_float(values[vector * d + i]);
        scales[vector] = quantize_fp8_e4m3_vector(x, &bytes[vector * d]);
        for (size_t i = 0; i < d; ++i)
          dequantized[vector * d + i] = fp8_e4m3_to_float(bytes[vector * d + i]) * scales[vector];
      }
    };
    quantize(k, k_fp8, k_scales, k_dequantized);
    quantize(v, v_fp8, v_scales, v_dequantized);
  }
  // NaN scales in the slots past each sequence's context in its last block (after quantize_fp8), as never-written
  // slots may hold: the kernels copy scales 4 at a time, so a partial chunk brings some of them in.
  void poison_fp8_scales_past_context(const std::vector<int>& context_lens) {
    for (size_t seq = 0; seq < context_lens.size(); ++seq)
      for (int token = context_lens[seq]; token % block_size != 0; ++token)
        for (int h = 0; h < shape.num_kv_heads; ++h) {
          const size_t vector = row_offset(static_cast<int>(seq), token, h) / static_cast<size_t>(shape.head_dim);
          k_scales[vector] = NAN;
          v_scales[vector] = NAN;
        }
  }
  // NaN in K and V of the slots past each sequence's context in its last block, as stale or never-written cache
  // slots may hold: a kernel that reads them into its products (even multiplied by a probability of 0) fails.
  void poison_past_context(const std::vector<int>& context_lens) {
    const __nv_bfloat16 nan = __float2bfloat16(NAN);
    for (size_t seq = 0; seq < context_lens.size(); ++seq)
      for (int token = context_lens[seq]; token % block_size != 0; ++token)
        for (int h = 0; h < shape.num_kv_heads; ++h) {
          const size_t offset = row_offset(static_cast<int>(seq), token, h);
          std::fill_n(k.begin() + static_cast<ptrdiff_t>(offset), shape.head_dim, nan);
          std::fill_n(v.begin() + static_cast<ptrdiff_t>(offset), shape.head_dim, nan);
        }
  }
};

// out [head_dim] of one query head attending to keys [0, num_keys) of a sequence, over the cache's values `k`, `v`
// (its bf16 values by default).
template <typename T = __nv_bfloat16>
inline std::vector<double> reference_attention(const PagedCache& cache, const __nv_bfloat16* q, int seq, int head,
                                               int num_keys, const std::vector<T>* k_values = nullptr,
                                               const std::vector<T>* v_values = nullptr) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (k_values == nullptr) k_values = &cache.k;
    if (v_values == nullptr) v_values = &cache.v;
  }
  const AttentionShape& s = cache.shape;
  const int kv_head = head / (s.num_heads / s.num_kv_heads);
  std::vector<double> scores(static_cast<size_t>(num_keys));
  double max_score = -INFINITY;
  for (int t = 0; t < num_keys; ++t) {
    const T* k = cache.row(*k_values, seq, t, kv_head);
    double dot = 0;
    for (int d = 0; d < s.head_dim; ++d) dot += to_float(q[d]) * to_float(k[d]);
    scores[t] = dot / std::sqrt(static_cast<double>(s.head_dim));
    max_score = std::max(max_score, scores[t]);
  }
  double sum = 0;
  for (double& x : scores) sum += x = std::exp(x - max_score);
  std::vector<double> out(static_cast<size_t>(s.head_dim), 0.0);
  for (int t = 0; t < num_keys; ++t) {
    const T* v = cache.row(*v_values, seq, t, kv_head);
    for (int d = 0; d < s.head_dim; ++d) out[d] += scores[t] / sum * to_float(v[d]);
  }
  return out;
}

// A prefill batch's metadata on the device (sequence i: table row table_rows[i], first row q_starts[i], q_lens[i] new
// tokens after cached[i]) and the params over `cache` that point at it; the caller sets q, out and the cache pointers.
struct DevicePrefillBatch {
  DeviceArray<int32_t> tables, table_rows, q_starts, q_lens, cached;
  PrefillAttentionParams params;

  DevicePrefillBatch(const PagedCache& cache, const std::vector<int32_t>& rows, const std::vector<int>& starts,
                     const std::vector<int>& lens, const std::vector<int>& cached_lens)
      : tables(cache.tables), table_rows(rows), q_starts(starts), q_lens(lens), cached(cached_lens) {
    PrefillAttentionParams& p = params;
    p.block_tables = tables.get();
    p.table_rows = table_rows.get();
    p.q_starts = q_starts.get();
    p.q_lens = q_lens.get();
    p.cached_lens = cached.get();
    p.block_table_stride = cache.stride;
    p.num_prefill = static_cast<int>(lens.size());
    p.max_q_len = *std::max_element(lens.begin(), lens.end());
    p.num_heads = cache.shape.num_heads;
    p.num_kv_heads = cache.shape.num_kv_heads;
    p.head_dim = cache.shape.head_dim;
    p.block_size = cache.block_size;
    p.pool_blocks = cache.num_blocks;
    p.scale = 1.0f / std::sqrt(static_cast<float>(cache.shape.head_dim));
  }
};

}  // namespace qinfer::cuda::testing
