// The fp8 prefill attention kernel (prefill_attention_fp8_sm90.cu) against a float64 reference over the dequantised
// fp8 cache (the values the cache holds), each output element within an error bound derived from the E4M3 rounding
// of Q and P. The bound itself is checked on the host: it holds for an emulation of the kernel's arithmetic and fails
// for outputs with a wrong scale or keys out of order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/kernels/prefill_attention.h"
#include "gpu_test_util.h"
#include "paged_test_cache.h"
#include "util/fp8.h"

namespace qinfer::cuda {
namespace {

using testing::AttentionShape;
using testing::DeviceArray;
using testing::PagedCache;
using testing::random_bf16;
using testing::to_float;

constexpr int kTileKeys = 128;  // the kernel's key tile: its online-softmax step and the unit of O's accumulation

// Sequences in one launch: sequence i has cached[i] tokens before its q_lens[i] new ones.
struct Fp8PrefillBatch {
  std::vector<int> cached, q_lens;
  std::vector<int> context_lens() const {
    std::vector<int> lens(cached.size());
    for (size_t i = 0; i < lens.size(); ++i) lens[i] = cached[i] + q_lens[i];
    return lens;
  }
};

// The fp8 cache of a batch: sequence s reads block-table row num_sequences - 1 - s (so a row differs from the sequence
// index), each row holding exactly its reader's context, so no block is shared and the slots past every context in
// its last block can hold NaN bytes and NaN scales, as stale slots may. Each (token, KV head) vector of K is scaled by
// 2^u, u uniform in [-1.5, 1.5], and of V by 2^u, u in [-3, 3], before quantisation: per-token scales that differ by
// up to 8x and 64x, so that a scale applied to the wrong key or not at all moves the output far past the bound.
struct Fp8PrefillCache {
  std::vector<int> table_rows;  // [num_sequences]
  PagedCache cache;

  Fp8PrefillCache(AttentionShape shape, int block_size, const Fp8PrefillBatch& batch, std::mt19937& rng)
      : table_rows(batch.cached.size()), cache(shape, rows_contexts(batch), rng, block_size) {
    std::iota(table_rows.rbegin(), table_rows.rend(), 0);
    const size_t d = static_cast<size_t>(shape.head_dim);
    const auto spread = [&](std::vector<__nv_bfloat16>& values, float log2_range) {
      std::uniform_real_distribution<float> exponent(-log2_range, log2_range);
      for (size_t vector = 0; vector < values.size() / d; ++vector) {
        const float factor = std::exp2(exponent(rng));
        for (size_t i = 0; i < d; ++i)
          values[vector * d + i] = __float2bfloat16(to_float(values[vector * d + i]) * factor);
      }
    };
    spread(cache.k, 1.5f);
    spread(cache.v, 3.0f);
    const std::vector<int> by_row = rows_contexts(batch);
    cache.poison_past_context(by_row);  // NaN values, which the quantiser turns into NaN bytes (0x7f)
    cache.quantize_fp8();
    cache.poison_fp8_scales_past_context(by_row);
  }
  static std::vector<int> rows_contexts(const Fp8PrefillBatch& batch) {
    std::vector<int> lens = batch.context_lens();
    std::reverse(lens.begin(), lens.end());
    return lens;
  }
};

// One query row [head_dim] as given and as the kernel rounds it: codes and scale of the cache quantiser.
struct QueryRow {
  std::vector<float> values;
  std::vector<uint8_t> codes;
  double scale = 0;

  QueryRow(const __nv_bfloat16* q, int head_dim) : values(static_cast<size_t>(head_dim)), codes(values.size()) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = to_float(q[i]);
    scale = quantize_fp8_e4m3_vector(values, codes.data());
  }
  double rounded(size_t i) const { return static_cast<double>(fp8_e4m3_to_float(codes[i])) * scale; }
};

int kv_head_of(const AttentionShape& shape, int head) { return head / (shape.num_heads / shape.num_kv_heads); }

// One output row (one query head) and its bound, [head_dim] each.
struct BoundedRow {
  std::vector<double> reference;  // softmax(q K^T * scale) V over the dequantised cache, q as given (bf16)
  std::vector<double> bound;      // |kernel - reference| must not exceed it
};

// The bound, per output element d, for a kernel that rounds q and P' to E4M3 (prefill_attention_fp8_sm90.cu):
//  1. Q: the kernel quantises each (token, head) row exactly as the host's quantize_fp8_e4m3_vector does, so the
//     effect of Q's rounding is known exactly: |o(q~) - o(q)|, with o(q~) the float64 attention from the rounded q~.
//  2. P: each P'_j = p~_j v_scale_j / u (p~_j = exp(s~_j - max), u the row's unit, at most U = the largest V scale
//     of its keys / 448) is rounded to nearest E4M3: a normal value by at most 2^-4 of itself, a subnormal by at
//     most 2^-10 (half its 2^-9 spacing). In the output, key j's error is at most
//     b_jd = (2^-4 p~_j v_scale_j + 2^-10 U) |code_jd| / L~, L~ = sum_j p~_j (the kernel's fp32 row sum; >= 1). The
//     errors of different keys are independent roundings of uniform-looking position: their sum is bounded by
//     3.5 sqrt(sum_j b_jd^2) (6 standard deviations of a sum of uniform errors, sd = b / sqrt(3)), not by the far
//     looser sum_j b_jd that would hide a wrong key order at long contexts.
//  3. Tensor-core accumulation: E4M3 products are exact, and the sums retain about 14 bits (DeepSeek-V3's measurement
//     of Hopper FP8 MMA): S within 2^-11 scale sum_i |q~_i k_id| (delta, moving each weight by at most a factor
//     e^(2 delta)), and each of O's 4 k32 steps per key tile within 2^-13 of the magnitude sum_j w~_j |V_jd|.
//  4. The bf16 output: 2^-8 of the value.
// Everything else (fp32 scale products, exp2.approx, the fp32 sums) is below 10^-5 of sum_j w~_j |V_jd|.
BoundedRow bounded_reference(const PagedCache& cache, const __nv_bfloat16* q, int table_row, int head, int num_keys,
                             int context_len) {
  const int kv_head = kv_head_of(cache.shape, head);
  const size_t d = static_cast<size_t>(cache.shape.head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const QueryRow query(q, cache.shape.head_dim);
  std::vector<double> scores(static_cast<size_t>(num_keys)), rounded_scores(scores.size());
  double delta = 0, max_score = -INFINITY, max_rounded = -INFINITY, v_scale_max = 0;
  for (int t = 0; t < num_keys; ++t)
    v_scale_max = std::max<double>(v_scale_max, cache.v_scales[cache.row_offset(table_row, t, kv_head) / d]);
  for (int t = 0; t < num_keys; ++t) {
    const float* k = cache.row(cache.k_dequantized, table_row, t, kv_head);
    double dot = 0, rounded = 0, magnitude = 0;
    for (size_t i = 0; i < d; ++i) {
      const double q_rounded = query.rounded(i);
      dot += query.values[i] * static_cast<double>(k[i]);
      rounded += q_rounded * k[i];
      magnitude += std::fabs(q_rounded * k[i]);
    }
    scores[t] = dot * scale;
    rounded_scores[t] = rounded * scale;
    delta = std::max(delta, std::ldexp(magnitude * scale, -11));
    max_score = std::max(max_score, scores[t]);
    max_rounded = std::max(max_rounded, rounded_scores[t]);
  }
  double sum = 0, rounded_sum = 0;
  for (int t = 0; t < num_keys; ++t) {
    sum += scores[t] = std::exp(scores[t] - max_score);
    rounded_sum += rounded_scores[t] = std::exp(rounded_scores[t] - max_rounded);
  }
  const double unit = v_scale_max / kFp8E4m3Max;
  std::vector<double> reference(d, 0.0), rounded_out(d, 0.0), magnitude(d, 0.0), variance(d, 0.0);
  for (int t = 0; t < num_keys; ++t) {
    const size_t offset = cache.row_offset(table_row, t, kv_head);
    const float* v = &cache.v_dequantized[offset];
    const uint8_t* codes = &cache.v_fp8[offset];
    const double v_scale = cache.v_scales[offset / d];
    const double weight = scores[t] / sum, rounded_weight = rounded_scores[t] / rounded_sum;
    for (size_t i = 0; i < d; ++i) {
      reference[i] += weight * v[i];
      rounded_out[i] += rounded_weight * v[i];
      magnitude[i] += rounded_weight * std::fabs(v[i]);
      const double b = (std::ldexp(rounded_scores[t] * v_scale, -4) + std::ldexp(unit, -10)) *
                       std::fabs(fp8_e4m3_to_float(codes[i])) / rounded_sum;
      variance[i] += b * b;
    }
  }
  const int tiles = (context_len - 1) / kTileKeys + 1;
  const double relative = std::expm1(2 * delta) + std::ldexp(4.0 * tiles, -13) + 1e-5;
  BoundedRow row{reference, std::vector<double>(d)};
  for (size_t i = 0; i < d; ++i) {
    const double rest = 3.5 * std::sqrt(variance[i]) + relative * magnitude[i];
    row.bound[i] = std::fabs(rounded_out[i] - reference[i]) + rest + std::ldexp(std::fabs(rounded_out[i]) + rest, -8);
  }
  return row;
}

// The elements of `out` (bf16 or float64) past their bound, and the largest |out - reference| / bound seen.
struct BoundCheck {
  size_t checked = 0, violations = 0;
  double worst_ratio = 0;
  template <typename T>
  void add(const T* out, const BoundedRow& row) {
    for (size_t i = 0; i < row.reference.size(); ++i) {
      const double value = to_float(out[i]);
      const double error = std::fabs(value - row.reference[i]);
      const double ratio = !std::isfinite(value) ? INFINITY : error == 0 ? 0.0 : error / row.bound[i];
      worst_ratio = std::max(worst_ratio, ratio);
      ++checked;
      if (!(ratio <= 1.0)) ++violations;
    }
  }
};

// Query rows i of each sequence with i % check_every == 0, and its last row: those compared.
template <typename Visit>
void for_each_checked_row(const Fp8PrefillBatch& batch, int check_every, Visit visit) {
  int q_start = 0;
  for (size_t seq = 0; seq < batch.q_lens.size(); ++seq) {
    for (int i = 0; i < batch.q_lens[seq]; ++i)
      if (i % check_every == 0 || i == batch.q_lens[seq] - 1) visit(static_cast<int>(seq), q_start + i, i);
    q_start += batch.q_lens[seq];
  }
}

// Queries [total tokens, num_heads, head_dim]: uniform in [-2, 2], each (token, head) row scaled by 2^u, u in [-1, 1],
// so that rows' Q scales differ (a row given another row's scale fails).
std::vector<__nv_bfloat16> random_queries(const Fp8PrefillBatch& batch, AttentionShape shape, std::mt19937& rng) {
  const int total = std::accumulate(batch.q_lens.begin(), batch.q_lens.end(), 0);
  std::vector<__nv_bfloat16> q = random_bf16(static_cast<size_t>(total) * shape.num_heads * shape.head_dim, rng, 2.0f);
  std::uniform_real_distribution<float> exponent(-1.0f, 1.0f);
  for (size_t row = 0; row < q.size() / shape.head_dim; ++row) {
    const float factor = std::exp2(exponent(rng));
    for (int i = 0; i < shape.head_dim; ++i) {
      __nv_bfloat16& x = q[row * shape.head_dim + i];
      x = __float2bfloat16(to_float(x) * factor);
    }
  }
  return q;
}

// Every prefix (0, 300, 4096 cached tokens) with every chunk length (1, 17, 128, 1000 new tokens) in one launch.
const Fp8PrefillBatch kPrefixesByChunks = {{0, 0, 0, 0, 300, 300, 300, 300, 4096, 4096, 4096, 4096},
                                           {1, 17, 128, 1000, 1, 17, 128, 1000, 1, 17, 128, 1000}};

// Mistakes a kernel could make, for checking that the bound catches them.
enum class Fp8Defect { kNone, kNeighbourKeyScale, kNeighbourValueScale, kValuesOutOfOrder };

// The kernel's arithmetic on the host for one output row: q rounded as the kernel rounds it, scores from the codes
// times the Q and K scales, the online softmax over 128-key tiles, P' rounded to E4M3 in the row's running V unit
// (the largest V scale of the keys it has seen / 448) and O kept in that unit. Only the tensor cores'
// accumulation precision is not modelled (term 3 of the bound). `defect` plants one mistake.
std::vector<double> emulated_kernel_row(const PagedCache& cache, const __nv_bfloat16* q, int table_row, int head,
                                        int num_keys, int context_len, Fp8Defect defect) {
  const int kv_head = kv_head_of(cache.shape, head);
  const size_t d = static_cast<size_t>(cache.shape.head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const QueryRow query(q, cache.shape.head_dim);
  const auto offset = [&](int t) { return cache.row_offset(table_row, t, kv_head); };
  const auto neighbour = [&](int t) { return (t ^ 1) < context_len ? t ^ 1 : t; };
  const auto k_scale = [&](int t) {
    return cache.k_scales[offset(defect == Fp8Defect::kNeighbourKeyScale ? neighbour(t) : t) / d];
  };
  const auto v_scale = [&](int t) {
    return cache.v_scales[offset(defect == Fp8Defect::kNeighbourValueScale ? neighbour(t) : t) / d];
  };
  const auto value_key = [&](int t) {
    return defect == Fp8Defect::kValuesOutOfOrder && (t ^ 8) < context_len ? t ^ 8 : t;
  };
  double row_max = -INFINITY, row_sum = 0, v_reference = 1e-30;
  std::vector<double> o(d, 0.0), tile_scores;
  for (int first = 0; first < num_keys; first += kTileKeys) {
    double tile_v_max = 0, tile_max = -INFINITY;
    for (int t = first; t < std::min(first + kTileKeys, num_keys); ++t)
      tile_v_max = std::max<double>(tile_v_max, v_scale(t));
    tile_scores.clear();
    for (int t = first; t < std::min(first + kTileKeys, num_keys); ++t) {
      const uint8_t* k_codes = &cache.k_fp8[offset(t)];
      double dot = 0;
      for (size_t i = 0; i < d; ++i)
        dot += static_cast<double>(fp8_e4m3_to_float(query.codes[i])) * fp8_e4m3_to_float(k_codes[i]);
      tile_scores.push_back(dot * query.scale * k_scale(t) * scale);
      tile_max = std::max(tile_max, tile_scores.back());
    }
    const double new_max = std::max(row_max, tile_max), new_reference = std::max(v_reference, tile_v_max);
    const double correction = row_max == -INFINITY ? 0.0 : std::exp(row_max - new_max);
    row_sum *= correction;
    for (double& x : o) x *= correction * v_reference / new_reference;
    for (int t = first; t < first + static_cast<int>(tile_scores.size()); ++t) {
      const double p = std::exp(tile_scores[static_cast<size_t>(t - first)] - new_max);
      row_sum += p;
      const double rounded =
          fp8_e4m3_to_float(float_to_fp8_e4m3(static_cast<float>(p * v_scale(t) * kFp8E4m3Max / new_reference)));
      const uint8_t* v_codes = &cache.v_fp8[offset(value_key(t))];
      for (size_t i = 0; i < d; ++i) o[i] += rounded * fp8_e4m3_to_float(v_codes[i]);
    }
    row_max = new_max;
    v_reference = new_reference;
  }
  for (double& x : o) x *= v_reference / kFp8E4m3Max / row_sum;
  return o;
}

// The bound checked against emulated_kernel_row over a batch (shape {128, 4, 1}, block 16), one defect.
BoundCheck check_emulation(const Fp8PrefillBatch& batch, int check_every, Fp8Defect defect, unsigned seed) {
  const AttentionShape shape{128, 4, 1};
  std::mt19937 rng(seed);
  const Fp8PrefillCache fp8(shape, 16, batch, rng);
  const std::vector<__nv_bfloat16> q = random_queries(batch, shape, rng);
  const size_t row_elements = static_cast<size_t>(shape.num_heads) * shape.head_dim;
  BoundCheck check;
  for_each_checked_row(batch, check_every, [&](int seq, int row, int i) {
    const int num_keys = batch.cached[seq] + i + 1, context_len = batch.cached[seq] + batch.q_lens[seq];
    for (int h = 0; h < shape.num_heads; ++h) {
      const __nv_bfloat16* q_row =
          &q[static_cast<size_t>(row) * row_elements + static_cast<size_t>(h) * shape.head_dim];
      const std::vector<double> out =
          emulated_kernel_row(fp8.cache, q_row, fp8.table_rows[seq], h, num_keys, context_len, defect);
      check.add(out.data(), bounded_reference(fp8.cache, q_row, fp8.table_rows[seq], h, num_keys, context_len));
    }
  });
  return check;
}

// On the host (no GPU): the kernel's arithmetic stays inside the bound, with room to spare for the tensor cores'
// accumulation, over every prefix and chunk length of the GPU test.
TEST(PrefillAttentionFp8Bound, HoldsForTheKernelsArithmetic) {
  const BoundCheck check = check_emulation(kPrefixesByChunks, 40, Fp8Defect::kNone, 41);
  EXPECT_EQ(check.violations, 0u) << "of " << check.checked << "; worst |error| / bound " << check.worst_ratio;
  EXPECT_LT(check.worst_ratio, 0.8);
}

// ... and a K or V scale taken from the neighbouring key, or values of keys 8 apart swapped (a Vᵀ layout mistake),
// put many elements past it, at short and long contexts.
TEST(PrefillAttentionFp8Bound, RejectsWrongScalesAndKeyOrder) {
  const Fp8PrefillBatch batch = {{0, 300, 4096}, {40, 17, 17}};
  for (Fp8Defect defect :
       {Fp8Defect::kNeighbourKeyScale, Fp8Defect::kNeighbourValueScale, Fp8Defect::kValuesOutOfOrder}) {
    const BoundCheck check = check_emulation(batch, 3, defect, 42);
    EXPECT_GT(check.violations, check.checked / 10)
        << "defect " << static_cast<int>(defect) << ": " << check.violations << " of " << check.checked;
  }
}

struct Fp8PrefillCase {
  AttentionShape shape;
  int block_size;
};

std::string fp8_case_name(const ::testing::TestParamInfo<Fp8PrefillCase>& info) {
  const Fp8PrefillCase& c = info.param;
  return std::string("d") + std::to_string(c.shape.head_dim) + "_h" + std::to_string(c.shape.num_heads) + "_kv" +
         std::to_string(c.shape.num_kv_heads) + "_block" + std::to_string(c.block_size);
}

class PrefillAttentionFp8Test : public ::testing::TestWithParam<Fp8PrefillCase> {
 protected:
  // The kernel's output [total tokens, num_heads, head_dim] for `batch` over `fp8`'s cache, queries `q`.
  std::vector<__nv_bfloat16> run_kernel(const Fp8PrefillBatch& batch, const Fp8PrefillCache& fp8,
                                        const std::vector<__nv_bfloat16>& q) const {
    const PagedCache& cache = fp8.cache;
    std::vector<int> q_starts(batch.q_lens.size());
    std::exclusive_scan(batch.q_lens.begin(), batch.q_lens.end(), q_starts.begin(), 0);
    DeviceArray<__nv_bfloat16> dq(q), out(q.size());
    DeviceArray<uint8_t> dk(cache.k_fp8), dv(cache.v_fp8);
    DeviceArray<float> dk_scales(cache.k_scales), dv_scales(cache.v_scales);
    testing::DevicePrefillBatch device_batch(cache, fp8.table_rows, q_starts, batch.q_lens, batch.cached);
    PrefillAttentionParams& p = device_batch.params;
    p.q = dq.get();
    p.k_fp8 = dk.get();
    p.v_fp8 = dv.get();
    p.k_scales = dk_scales.get();
    p.v_scales = dv_scales.get();
    p.out = out.get();
    launch_prefill_attention_fp8(p, test_stream());
    return out.download();
  }

  bool kernel_available() const {
    return prefill_attention_fp8_available(test_device(), GetParam().shape.head_dim, GetParam().block_size);
  }

  void check_within_bounds(const Fp8PrefillBatch& batch, unsigned seed) {
    const Fp8PrefillCase& c = GetParam();
    if (!kernel_available()) GTEST_SKIP() << "the fp8 prefill kernel needs an sm_90a build on a compute 9.0 GPU";
    const AttentionShape shape = c.shape;
    std::mt19937 rng(seed);
    const Fp8PrefillCache fp8(shape, c.block_size, batch, rng);
    const PagedCache& cache = fp8.cache;
    const std::vector<__nv_bfloat16> q = random_queries(batch, shape, rng);
    const std::vector<__nv_bfloat16> result = run_kernel(batch, fp8, q);

    // The float64 reference over 4 K keys costs the most here: every 12th row (24th with many heads), and a quarter of
    // the heads per row, rotating with the row (every head and KV head is checked over the rows).
    const int check_every = shape.num_heads > 8 ? 24 : 12;
    const size_t row_elements = static_cast<size_t>(shape.num_heads) * shape.head_dim;
    BoundCheck check;
    for_each_checked_row(batch, check_every, [&](int seq, int row, int i) {
      for (int h = row % 4; h < shape.num_heads; h += 4) {
        const size_t offset = static_cast<size_t>(row) * row_elements + static_cast<size_t>(h) * shape.head_dim;
        check.add(&result[offset], bounded_reference(cache, &q[offset], fp8.table_rows[seq], h,
                                                     batch.cached[seq] + i + 1, batch.cached[seq] + batch.q_lens[seq]));
      }
    });
    EXPECT_EQ(check.violations, 0u) << "of " << check.checked << " elements; worst |error| / bound "
                                    << check.worst_ratio;
    RecordProperty("worst_error_to_bound", std::to_string(check.worst_ratio));
  }
};

TEST_P(PrefillAttentionFp8Test, PrefixesAndChunksWithinFp8Bounds) {
  SKIP_WITHOUT_GPU();
  check_within_bounds(kPrefixesByChunks, 31);
}

TEST_P(PrefillAttentionFp8Test, ContextsOnKeyTileBoundaries) {
  SKIP_WITHOUT_GPU();
  // Contexts and query blocks that end exactly on a 128-key tile, one key past one, one short of one.
  check_within_bounds({{0, 128, 0, 127, 256}, {256, 256, 129, 1, 127}}, 32);
}

TEST_P(PrefillAttentionFp8Test, ManyShortSequences) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(33);
  std::uniform_int_distribution<int> cached_dist(0, 150), len_dist(1, 70);
  Fp8PrefillBatch batch;
  for (int i = 0; i < 37; ++i) {
    batch.cached.push_back(i % 3 == 0 ? 0 : cached_dist(rng));
    batch.q_lens.push_back(len_dist(rng));
  }
  check_within_bounds(batch, 34);
}

// A row's result depends on its own keys only (its Q scale, V unit and tiles are its own), not on the rows it shares a
// query block with: a 700-token prompt prefilled whole and as 300 cached + 400 new tokens (other block boundaries)
// agrees to the bf16 output's last bit, allowing one step where the tensor cores' accumulator rounds differently (a
// block may add a fully masked tile of zeros that the other does not).
TEST_P(PrefillAttentionFp8Test, ChunkingDoesNotChangeRows) {
  SKIP_WITHOUT_GPU();
  if (!kernel_available()) GTEST_SKIP() << "the fp8 prefill kernel needs an sm_90a build on a compute 9.0 GPU";
  const Fp8PrefillCase& c = GetParam();
  const Fp8PrefillBatch whole = {{0}, {700}}, chunked = {{300}, {400}};
  std::mt19937 rng(35);
  const Fp8PrefillCache fp8(c.shape, c.block_size, whole, rng);
  const std::vector<__nv_bfloat16> q = random_queries(whole, c.shape, rng);
  const size_t row_elements = static_cast<size_t>(c.shape.num_heads) * c.shape.head_dim;
  const std::vector<__nv_bfloat16> tail(q.begin() + static_cast<ptrdiff_t>(300 * row_elements), q.end());
  const std::vector<__nv_bfloat16> whole_out = run_kernel(whole, fp8, q), chunked_out = run_kernel(chunked, fp8, tail);
  size_t differing = 0;
  for (size_t i = 0; i < chunked_out.size(); ++i) {
    const double a = to_float(whole_out[300 * row_elements + i]), b = to_float(chunked_out[i]);
    if (!(std::fabs(a - b) <= std::ldexp(std::fabs(a), -7))) ++differing;
  }
  EXPECT_EQ(differing, 0u) << "of " << chunked_out.size();
}

// Qwen3-4B (GQA 4), a wider group, and 32-token blocks.
INSTANTIATE_TEST_SUITE_P(Kernel, PrefillAttentionFp8Test,
                         ::testing::Values(Fp8PrefillCase{{128, 32, 8}, 16}, Fp8PrefillCase{{128, 8, 1}, 16},
                                           Fp8PrefillCase{{128, 6, 2}, 32}),
                         fp8_case_name);

}  // namespace
}  // namespace qinfer::cuda
