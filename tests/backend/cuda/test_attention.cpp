// Paged decode and prefill attention against a float64 reference over a random paged KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "gpu_test_util.h"
#include "util/fp8.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;
using testing::random_bf16;
using testing::relative_error;

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
        for (size_t i = 0; i < d; ++i) x[i] = testing::to_float(values[vector * d + i]);
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
std::vector<double> reference_attention(const PagedCache& cache, const __nv_bfloat16* q, int seq, int head,
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
    for (int d = 0; d < s.head_dim; ++d) dot += testing::to_float(q[d]) * testing::to_float(k[d]);
    scores[t] = dot / std::sqrt(static_cast<double>(s.head_dim));
    max_score = std::max(max_score, scores[t]);
  }
  double sum = 0;
  for (double& x : scores) sum += x = std::exp(x - max_score);
  std::vector<double> out(static_cast<size_t>(s.head_dim), 0.0);
  for (int t = 0; t < num_keys; ++t) {
    const T* v = cache.row(*v_values, seq, t, kv_head);
    for (int d = 0; d < s.head_dim; ++d) out[d] += scores[t] / sum * testing::to_float(v[d]);
  }
  return out;
}

// How a decode attention case splits the context and merges the splits.
struct DecodeSplitCase {
  int num_sms;  // the planner's SM count; 0: one 64-token tile per split (the most splits)
  int block_size;
  bool merge_in_kernel;  // arrival counters: the last split block merges; else the second kernel
};

// The slots of each sequence's last cache block past its context hold NaN (bf16 0x7FC0): a kernel that lets a masked
// key's K or V into the result turns it into NaN. The cp.async kernel zero-fills such rows; the bulk-copy kernel copies
// whole 16-key boxes and must mask them itself.
void poison_block_tails(PagedCache& cache, const std::vector<int>& context_lens) {
  const auto nan = static_cast<__nv_bfloat16>(__nv_bfloat16_raw{0x7FC0});
  for (size_t seq = 0; seq < context_lens.size(); ++seq) {
    const int len = context_lens[seq];
    const int64_t block = cache.tables[seq * static_cast<size_t>(cache.stride) + (len - 1) / cache.block_size];
    for (int kv_head = 0; kv_head < cache.shape.num_kv_heads; ++kv_head)
      for (int slot = (len - 1) % cache.block_size + 1; slot < cache.block_size; ++slot) {
        const size_t first = static_cast<size_t>(
            ((block * cache.shape.num_kv_heads + kv_head) * cache.block_size + slot) * cache.shape.head_dim);
        std::fill_n(cache.k.begin() + static_cast<ptrdiff_t>(first), cache.shape.head_dim, nan);
        std::fill_n(cache.v.begin() + static_cast<ptrdiff_t>(first), cache.shape.head_dim, nan);
      }
  }
}

std::string kernel_name(DecodeAttentionKernel kernel) {
  return kernel == DecodeAttentionKernel::kBulkCopy           ? "bulk copy"
         : kernel == DecodeAttentionKernel::kBulkCopyTwoStage ? "bulk copy, 2 stages"
         : kernel == DecodeAttentionKernel::kAuto             ? "auto"
         : kernel == DecodeAttentionKernel::kRegisters        ? "registers"
                                                              : "cp.async";
}

// The KV cache a decode attention case reads: bf16, or fp8 (the same random values through the host quantiser,
// checked against a reference over the dequantised values).
enum class CacheDtype { kBf16, kFp8 };

class DecodeAttentionTest
    : public ::testing::TestWithParam<std::tuple<AttentionShape, DecodeSplitCase, DecodeAttentionKernel, CacheDtype>> {
};

TEST_P(DecodeAttentionTest, MatchesReference) {
  SKIP_WITHOUT_GPU();
  const auto [shape, split_case, kernel, dtype] = GetParam();
  const bool fp8 = dtype == CacheDtype::kFp8;
  std::mt19937 rng(shape.head_dim * 31 + shape.num_heads + split_case.num_sms * 7 + split_case.block_size);
  // Around tile (64) and block (16, 32) edges, long and odd; splits are planned for a power-of-two bucket above the
  // longest context (as decode graphs do), so some splits hold no tokens.
  const std::vector<int> context_lens = {1, 15, 16, 17, 63, 64, 65, 300, 1000, 2049, 4099};
  constexpr int kPlannedContext = 8192;
  const int seqs = static_cast<int>(context_lens.size());
  PagedCache cache(shape, context_lens, rng, split_case.block_size);
  poison_block_tails(cache, context_lens);  // for fp8: NaN bytes (0x7F), then NaN scales
  if (fp8) {
    cache.quantize_fp8();
    cache.poison_fp8_scales_past_context(context_lens);
  }
  const auto q = random_bf16(static_cast<size_t>(seqs) * shape.num_heads * shape.head_dim, rng, 2.0f);
  std::vector<int32_t> table_rows(static_cast<size_t>(seqs)), q_rows(static_cast<size_t>(seqs));
  std::iota(table_rows.begin(), table_rows.end(), 0);
  std::iota(q_rows.rbegin(), q_rows.rend(), 0);  // queries and outputs in the opposite order of the tables

  DeviceArray<__nv_bfloat16> dq(q), dk(cache.k), dv(cache.v), out(q.size());
  DeviceArray<int32_t> dtables(cache.tables), dtable_rows(table_rows), dq_rows(q_rows), dlens(context_lens);
  DeviceArray<uint8_t> dk_fp8(fp8 ? cache.k_fp8 : std::vector<uint8_t>(1)),
      dv_fp8(fp8 ? cache.v_fp8 : std::vector<uint8_t>(1));
  DeviceArray<float> dk_scales(fp8 ? cache.k_scales : std::vector<float>(1)),
      dv_scales(fp8 ? cache.v_scales : std::vector<float>(1));
  DecodeAttentionParams p;
  p.q = dq.get();
  p.k_cache = dk.get();
  p.v_cache = dv.get();
  if (fp8) {
    p.kv_dtype = KvCacheDtype::kFp8E4m3;
    p.k_fp8 = dk_fp8.get();
    p.v_fp8 = dv_fp8.get();
    p.k_scales = dk_scales.get();
    p.v_scales = dv_scales.get();
  }
  p.block_tables = dtables.get();
  p.table_rows = dtable_rows.get();
  p.q_rows = dq_rows.get();
  p.context_lens = dlens.get();
  p.out = out.get();
  p.block_table_stride = cache.stride;
  p.num_decode = seqs;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_dim = shape.head_dim;
  p.block_size = split_case.block_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  p.pool_blocks = cache.num_blocks;
  if ((kernel == DecodeAttentionKernel::kBulkCopy || kernel == DecodeAttentionKernel::kBulkCopyTwoStage) &&
      !decode_attention_bulk_copy_available(p, test_device()))
    GTEST_SKIP() << "the bulk-copy kernel needs an sm_90a build on a compute 9.0 device";
  size_t split_rows = 0;
  DecodeAttentionPlan plan;
  if (split_case.num_sms > 0) {
    plan = plan_decode_attention(p, kPlannedContext, test_device_with_sms(split_case.num_sms));
    split_rows = static_cast<size_t>(decode_attention_max_split_rows(seqs, split_case.num_sms));
    ASSERT_LE(static_cast<size_t>(p.num_decode * plan.num_splits), split_rows);
  } else {
    plan = {.tokens_per_split = 64, .num_splits = kPlannedContext / 64};
    split_rows = static_cast<size_t>(seqs) * plan.num_splits;
  }
  plan.kernel = kernel;
  DeviceArray<float> split_out(split_rows * shape.num_heads * shape.head_dim), split_lse(split_rows * shape.num_heads);
  DeviceArray<uint32_t> counters(std::vector<uint32_t>(static_cast<size_t>(seqs) * shape.num_kv_heads, 0));
  p.split_out = split_out.get();
  p.split_lse = split_lse.get();
  p.merge_in_kernel = split_case.merge_in_kernel;
  p.split_counters = split_case.merge_in_kernel ? counters.get() : nullptr;

  std::vector<double> ref;
  ref.resize(q.size());
  for (int s = 0; s < seqs; ++s)
    for (int h = 0; h < shape.num_heads; ++h) {
      const size_t row = (static_cast<size_t>(q_rows[s]) * shape.num_heads + h) * shape.head_dim;
      const auto o =
          fp8 ? reference_attention(cache, &q[row], s, h, context_lens[s], &cache.k_dequantized, &cache.v_dequantized)
              : reference_attention(cache, &q[row], s, h, context_lens[s]);
      std::copy(o.begin(), o.end(), ref.begin() + static_cast<ptrdiff_t>(row));
    }
  // Twice: the second launch relies on the counters the first one left at zero. The split scratch is NaN before each
  // launch: the merge must read only the partials of the splits that hold keys (the idle ones write none).
  for (int launch = 0; launch < 2; ++launch) {
    CUDA_CHECK(cudaMemset(out.get(), 0xFF, q.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemset(split_out.get(), 0xFF, split_out.size() * sizeof(float)));
    CUDA_CHECK(cudaMemset(split_lse.get(), 0xFF, split_lse.size() * sizeof(float)));
    launch_decode_attention(p, plan, test_stream());
    EXPECT_LT(relative_error(out.download(), ref), 1e-2)
        << (fp8 ? "fp8 " : "bf16 ") << kernel_name(kernel) << ", launch " << launch << ", splits " << plan.num_splits;
    for (uint32_t count : counters.download()) ASSERT_EQ(count, 0u);
  }
}

// GQA 4:1 (Qwen3), 8:1 and 1:1 at head_dim 128 run the fp8 bulk-copy kernel (groups up to 8, one head block); 16:1
// runs the cp.async fp8 kernel's two head blocks.
const auto kDecodeShapes = ::testing::Values(
    AttentionShape{128, 32, 8}, AttentionShape{128, 4, 1}, AttentionShape{64, 6, 2}, AttentionShape{128, 16, 1},
    AttentionShape{64, 16, 1}, AttentionShape{128, 8, 1}, AttentionShape{128, 2, 2});
const auto kDecodeSplitCases =
    ::testing::Values(DecodeSplitCase{1, 16, false}, DecodeSplitCase{132, 16, true}, DecodeSplitCase{132, 32, false},
                      DecodeSplitCase{0, 32, true}, DecodeSplitCase{0, 16, false});
INSTANTIATE_TEST_SUITE_P(
    Bf16, DecodeAttentionTest,
    ::testing::Combine(kDecodeShapes, kDecodeSplitCases,
                       ::testing::Values(DecodeAttentionKernel::kCpAsync, DecodeAttentionKernel::kBulkCopy,
                                         DecodeAttentionKernel::kBulkCopyTwoStage, DecodeAttentionKernel::kRegisters),
                       ::testing::Values(CacheDtype::kBf16)));
// Over an fp8 cache: the cp.async fp8 kernel, the bulk-copy one (head_dim 64: the cp.async kernel again, see
// plan.h) and the register one.
INSTANTIATE_TEST_SUITE_P(Fp8, DecodeAttentionTest,
                         ::testing::Combine(kDecodeShapes, kDecodeSplitCases,
                                            ::testing::Values(DecodeAttentionKernel::kCpAsync,
                                                              DecodeAttentionKernel::kBulkCopy,
                                                              DecodeAttentionKernel::kRegisters),
                                            ::testing::Values(CacheDtype::kFp8)));

// On Hopper with a pool, kAuto's ring kernel over a bf16 cache is the 2-stage bulk-copy kernel for 5 to
// kDecodeAttentionTwoStageBatch sequences and the 3-stage one beyond; over fp8 the bulk-copy kernel at every batch.
// The plan follows the kernel's residency: 16 sequences x 1 K (128 (sequence, KV head) pairs, 16 tiles) take 3 splits
// of 6 tiles at 3 blocks per SM (384 blocks, one wave of 396), where 2 blocks per SM would take 2 of 8 (256 of 264).
TEST(DecodeAttentionPlan, AutoRingKernelFollowsBatchOnHopper) {
  SKIP_WITHOUT_GPU();
  alignas(16) const uint8_t fp8_pool_stand_in[16] = {};  // the bulk-copy kernels need 16-byte aligned pools
  DecodeAttentionParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.block_size = 16;
  p.pool_blocks = 1024;
  if (!decode_attention_bulk_copy_available(p, test_device()))
    GTEST_SKIP() << "needs an sm_90a build on a compute 9.0 device";
  for (bool fp8 : {false, true})
    for (int num_decode : {5, 16, kDecodeAttentionTwoStageBatch, kDecodeAttentionTwoStageBatch + 1, 64}) {
      p.kv_dtype = fp8 ? KvCacheDtype::kFp8E4m3 : KvCacheDtype::kBf16;
      p.k_fp8 = fp8 ? fp8_pool_stand_in : nullptr;
      p.num_decode = num_decode;
      const DecodeAttentionPlan plan = plan_decode_attention(p, 1024, test_device_with_sms(132));
      const bool two_stage = !fp8 && num_decode <= kDecodeAttentionTwoStageBatch;
      EXPECT_EQ(plan.kernel, two_stage ? DecodeAttentionKernel::kBulkCopyTwoStage : DecodeAttentionKernel::kBulkCopy)
          << num_decode << " sequences" << (fp8 ? ", fp8" : ", bf16");
      if (!fp8 && num_decode == 16) {
        EXPECT_EQ(plan.num_splits, 3);
      }
    }
}

// kWgmmaSplits: the wgmma kernel given split buffers, so that it splits the keys where its grid is small.
enum class PrefillKernel { kMmaSync, kWgmma, kWgmmaSplits };

struct PrefillCase {
  AttentionShape shape;
  int block_size;
  PrefillKernel kernel;
};

std::string prefill_case_name(const ::testing::TestParamInfo<PrefillCase>& info) {
  const PrefillCase& c = info.param;
  const char* kernel = c.kernel == PrefillKernel::kWgmma         ? "wgmma"
                       : c.kernel == PrefillKernel::kWgmmaSplits ? "wgmma_splits"
                                                                 : "mma_sync";
  return std::string(kernel) + "_d" + std::to_string(c.shape.head_dim) + "_h" + std::to_string(c.shape.num_heads) +
         "_kv" + std::to_string(c.shape.num_kv_heads) + "_block" + std::to_string(c.block_size);
}

size_t row_elements(const AttentionShape& shape) { return static_cast<size_t>(shape.num_heads) * shape.head_dim; }

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {
 protected:
  // Sequence i has cached[i] tokens in the cache before its q_lens[i] new ones; all are attended to causally. Query
  // rows i % check_every == 0 and each sequence's last row are compared (all heads), to bound the float64 reference.
  // expect_splits: with kWgmmaSplits the case must split its keys (the other kernels run it whole).
  void check_against_reference(const std::vector<int>& cached, const std::vector<int>& q_lens, unsigned seed,
                               int check_every = 1, bool poison_past_context = false, bool expect_splits = false) {
    const PrefillCase& c = GetParam();
    if (c.kernel != PrefillKernel::kMmaSync && !prefill_attention_wgmma_available(test_device()))
      GTEST_SKIP() << "the wgmma kernel needs an sm_90a build on a compute 9.0 GPU";
    const AttentionShape shape = c.shape;
    std::mt19937 rng(seed);
    std::vector<int> context_lens, q_starts;
    int total = 0;
    for (size_t i = 0; i < cached.size(); ++i) {
      context_lens.push_back(cached[i] + q_lens[i]);
      q_starts.push_back(total);
      total += q_lens[i];
    }
    const int seqs = static_cast<int>(cached.size());
    PagedCache cache(shape, context_lens, rng, c.block_size);
    if (poison_past_context) cache.poison_past_context(context_lens);
    const auto q = random_bf16(static_cast<size_t>(total) * shape.num_heads * shape.head_dim, rng, 2.0f);
    // Sequences use the block-table rows in reverse, so a table row differs from the sequence index.
    std::vector<int32_t> table_rows(static_cast<size_t>(seqs));
    std::iota(table_rows.rbegin(), table_rows.rend(), 0);

    DeviceArray<__nv_bfloat16> dq(q), dk(cache.k), dv(cache.v), out(q.size());
    DeviceArray<int32_t> dtables(cache.tables), drows(table_rows), dstarts(q_starts), dlens(q_lens), dcached(cached);
    PrefillAttentionParams p;
    p.q = dq.get();
    p.k_cache = dk.get();
    p.v_cache = dv.get();
    p.block_tables = dtables.get();
    p.table_rows = drows.get();
    p.q_starts = dstarts.get();
    p.q_lens = dlens.get();
    p.cached_lens = dcached.get();
    p.out = out.get();
    p.block_table_stride = cache.stride;
    p.num_prefill = seqs;
    p.max_q_len = *std::max_element(q_lens.begin(), q_lens.end());
    p.num_heads = shape.num_heads;
    p.num_kv_heads = shape.num_kv_heads;
    p.head_dim = shape.head_dim;
    p.block_size = cache.block_size;
    p.pool_blocks = cache.num_blocks;
    p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    // Split buffers for up to 8 splits of every row (at most 4 096 rows), NaN-filled: a row the merge reads but no
    // split wrote shows.
    const size_t split_rows =
        c.kernel == PrefillKernel::kWgmmaSplits ? std::min<size_t>(8 * static_cast<size_t>(total), 4096) : 1;
    DeviceArray<float> split_out(std::vector<float>(split_rows * row_elements(shape), NAN));
    DeviceArray<float> split_lse(std::vector<float>(split_rows * static_cast<size_t>(shape.num_heads), NAN));
    if (c.kernel == PrefillKernel::kWgmmaSplits) {
      p.split_out = split_out.get();
      p.split_lse = split_lse.get();
      p.split_rows_capacity = static_cast<int>(split_rows);
      p.num_tokens = total;
      p.max_context_len = *std::max_element(context_lens.begin(), context_lens.end());
      const int splits = prefill_attention_kv_splits(p, test_device().num_sms);
      if (expect_splits) {
        EXPECT_GT(splits, 1) << "the case was meant to split its keys";
      }
    }
    if (c.kernel != PrefillKernel::kMmaSync)
      launch_prefill_attention_wgmma(p, test_stream());
    else
      launch_prefill_attention_mma_sync(p, test_stream());

    const std::vector<__nv_bfloat16> result = out.download();
    const size_t row_width = row_elements(shape);
    std::vector<__nv_bfloat16> checked;
    std::vector<double> ref;
    for (int s = 0; s < seqs; ++s)
      for (int i = 0; i < q_lens[s]; ++i) {
        if (i % check_every != 0 && i != q_lens[s] - 1) continue;
        const size_t row = static_cast<size_t>(q_starts[s] + i);
        checked.insert(checked.end(), result.begin() + static_cast<ptrdiff_t>(row * row_width),
                       result.begin() + static_cast<ptrdiff_t>((row + 1) * row_width));
        for (int h = 0; h < shape.num_heads; ++h) {
          auto o = reference_attention(cache, &q[row * row_width + static_cast<size_t>(h) * shape.head_dim],
                                       table_rows[s], h, cached[s] + i + 1);
          ref.insert(ref.end(), o.begin(), o.end());
        }
      }
    EXPECT_LT(relative_error(checked, ref), 1e-2);
  }
};

TEST_P(PrefillAttentionTest, MatchesReferenceWithCachedPrefixes) {
  SKIP_WITHOUT_GPU();
  // A fresh prompt, a short chunk after a prefix, a long chunk, one token, one full 64-token tile.
  check_against_reference({0, 37, 200, 64, 0}, {100, 5, 130, 1, 64}, 11);
}

TEST_P(PrefillAttentionTest, LongChunksWrapThePipeline) {
  SKIP_WITHOUT_GPU();
  // Many key tiles per query block (stages reused several times), a diagonal that crosses tile boundaries.
  check_against_reference({0, 333, 1000}, {520, 700, 129}, 12, 5);
}

TEST_P(PrefillAttentionTest, IgnoresStaleSlotsPastTheContext) {
  SKIP_WITHOUT_GPU();
  // Contexts that end inside a key tile and inside a cache block, after full tiles that take the bulk-copy path. All
  // three end at the same position: the harness hands sequence i the table row of sequence n - 1 - i, so equal
  // contexts keep every poisoned slot past every reader's context.
  check_against_reference({0, 250, 376}, {377, 127, 1}, 15, 3, true);
}

TEST_P(PrefillAttentionTest, ContextsOnKeyTileBoundaries) {
  SKIP_WITHOUT_GPU();
  // Contexts and query blocks that end exactly on a 128-key tile (every tile by bulk copy), one key past one, one key
  // short of one, and a cached prefix of exactly one tile: the producer warps' K and V tiles in every mix of paths.
  check_against_reference({0, 128, 0, 127, 256}, {256, 256, 129, 1, 127}, 16, 3);
}

TEST_P(PrefillAttentionTest, ManyShortSequences) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> cached_dist(0, 150), len_dist(1, 70);
  std::vector<int> cached(37), q_lens(37);
  for (size_t i = 0; i < cached.size(); ++i) {
    cached[i] = i % 3 == 0 ? 0 : cached_dist(rng);
    q_lens[i] = len_dist(rng);
  }
  check_against_reference(cached, q_lens, 14);
}

TEST_P(PrefillAttentionTest, ShortChunksAfterLongContextsSplitTheirKeys) {
  SKIP_WITHOUT_GPU();
  // A question of 16 tokens about a long cached document, a 5-token verify step, and a 200-token chunk beside a
  // 3-token one and one whose context is shorter than the splits (its later splits have no key: lse -inf). Stale
  // slots are poisoned where every sequence has its own table (one sequence), as in IgnoresStaleSlotsPastTheContext.
  check_against_reference({6000}, {16}, 17, 1, true, true);
  check_against_reference({3001}, {5}, 18, 1, true, true);
  // Three sequences of two query blocks fill a GPU with 32 heads (192 blocks), so only the smaller shapes split here.
  check_against_reference({4500, 2000, 10}, {200, 3, 4}, 19, 7, false, GetParam().shape.num_heads <= 16);
}

std::vector<PrefillCase> prefill_cases() {
  std::vector<PrefillCase> cases;
  for (PrefillKernel kernel : {PrefillKernel::kMmaSync, PrefillKernel::kWgmma, PrefillKernel::kWgmmaSplits}) {
    cases.push_back({{128, 32, 8}, 16, kernel});  // Qwen3-4B: GQA 4
    cases.push_back({{128, 4, 1}, 16, kernel});
    cases.push_back({{128, 6, 2}, 32, kernel});  // GQA 3, 32-token blocks
    cases.push_back({{64, 6, 2}, 16, kernel});   // the tiny test models
    cases.push_back({{64, 8, 2}, 48, kernel});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Kernels, PrefillAttentionTest, ::testing::ValuesIn(prefill_cases()), prefill_case_name);

}  // namespace
}  // namespace qinfer::cuda
