// The decode attention kernels with the QK-norm/RoPE/cache write fused in (DecodeAttentionParams::fuse_rope) against
// the two kernels they replace: the QK-norm/RoPE kernel, then the same attention kernel reading its q. Outputs and
// every cache byte (and fp8 scale) must be bit-identical: the register kernels with one to eight sequences, the
// cp.async and bulk-copy kernels with 1 to 64 (the current token in the first tiles, copied after the wait, or later),
// over both cache dtypes, GQA groups 1 to 16 (the fp8 bulk-copy kernel: up to 8, head_dim 128; kBulkCopy runs the fp8
// cp.async kernel otherwise) and head_dim 64 and 128; the 2-stage bulk-copy kernel over a bf16 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;
using testing::random_bf16;

struct FusedCase {
  int head_dim, num_heads, num_kv_heads;
  std::vector<int> context_lens;  // including the current token
  bool fp8;
  DecodeAttentionKernel kernel;
};

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// One path's buffers: its copy of the cache (both dtypes' pools), its q and its output.
struct Path {
  DeviceArray<__nv_bfloat16> k, v, q, out;
  DeviceArray<uint8_t> k8, v8;
  DeviceArray<float> ks, vs;
};

// Points the params' fp8 cache (QkNormRopeCacheWriteParams or DecodeAttentionParams) at the path's pools.
template <typename Params>
void use_fp8_pools(Params& params, const Path& path) {
  params.k_fp8 = path.k8.get();
  params.v_fp8 = path.v8.get();
  params.k_scales = path.ks.get();
  params.v_scales = path.vs.get();
}

class FusedRopeTest : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedRopeTest, MatchesTheRopeKernelThenAttention) {
  SKIP_WITHOUT_GPU();
  const FusedCase c = GetParam();
  const int block_size = 16, seqs = static_cast<int>(c.context_lens.size());
  const int width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  std::mt19937 rng(c.head_dim + 7 * c.num_heads + 13 * seqs + (c.fp8 ? 1000 : 0));

  // Scattered blocks for each sequence; the current token (the last of its context) is written by the kernels.
  int stride = 0, needed = 0;
  for (int len : c.context_lens) {
    stride = std::max(stride, (len + block_size - 1) / block_size);
    needed += (len + block_size - 1) / block_size;
  }
  const int num_blocks = needed + 2;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks)), tables(static_cast<size_t>(seqs) * stride, 0);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (int s = 0; s < seqs; ++s)
    for (int b = 0; b < (c.context_lens[s] + block_size - 1) / block_size; ++b)
      tables[static_cast<size_t>(s) * stride + b] = ids[next++];
  // Token t of the step is sequence seqs - 1 - t (queries in the opposite order of the tables).
  std::vector<int32_t> table_rows(static_cast<size_t>(seqs)), q_rows(static_cast<size_t>(seqs)),
      positions(static_cast<size_t>(seqs));
  std::vector<int64_t> slots(static_cast<size_t>(seqs));
  for (int s = 0; s < seqs; ++s) {
    const int token = seqs - 1 - s, current = c.context_lens[s] - 1;
    table_rows[s] = s;
    q_rows[s] = token;
    positions[token] = current;
    slots[token] = static_cast<int64_t>(tables[static_cast<size_t>(s) * stride + current / block_size]) * block_size +
                   current % block_size;
  }
  std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
  for (int i = 0; i < c.head_dim / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(1e6, -2.0 * i / c.head_dim));

  const auto qkv = random_bf16(static_cast<size_t>(seqs) * width, rng, 3.0f);
  const auto q_norm = random_bf16(c.head_dim, rng, 0.25f, 1.0f), k_norm = random_bf16(c.head_dim, rng, 0.25f, 1.0f);
  const size_t vectors = static_cast<size_t>(num_blocks) * c.num_kv_heads * block_size;
  const size_t elements = vectors * c.head_dim;
  // Two copies of one random cache: one for each path.
  const auto k_bf16 = random_bf16(elements, rng), v_bf16 = random_bf16(elements, rng);
  std::vector<uint8_t> k_bytes(elements), v_bytes(elements);
  std::uniform_int_distribution<int> byte(0, 0x7e);  // finite E4M3 codes of either sign
  for (size_t i = 0; i < elements; ++i) {
    k_bytes[i] = static_cast<uint8_t>(byte(rng) | (i % 3 == 0 ? 0x80 : 0));
    v_bytes[i] = static_cast<uint8_t>(byte(rng) | (i % 5 == 0 ? 0x80 : 0));
  }
  std::vector<float> scales(vectors);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (float& x : scales) x = scale(rng);

  DeviceArray<__nv_bfloat16> dqkv(qkv), dq_norm(q_norm), dk_norm(k_norm);
  DeviceArray<float> dinv_freq(inv_freq);
  DeviceArray<int32_t> dtables(tables), dtable_rows(table_rows), dq_rows(q_rows), dpositions(positions),
      dlens(c.context_lens);
  DeviceArray<int64_t> dslots(slots);
  const size_t q_elements = static_cast<size_t>(seqs) * c.num_heads * c.head_dim;
  // Each path starts from its own copy of the same cache.
  const auto make_path = [&] {
    return Path{DeviceArray<__nv_bfloat16>(k_bf16),
                DeviceArray<__nv_bfloat16>(v_bf16),
                DeviceArray<__nv_bfloat16>(q_elements),
                DeviceArray<__nv_bfloat16>(q_elements),
                DeviceArray<uint8_t>(k_bytes),
                DeviceArray<uint8_t>(v_bytes),
                DeviceArray<float>(scales),
                DeviceArray<float>(scales)};
  };
  Path unfused = make_path(), fused = make_path();

  const auto rope_params = [&](Path& path) {
    QkNormRopeCacheWriteParams r;
    r.qkv = dqkv.get();
    r.positions = dpositions.get();
    r.slots = dslots.get();
    r.q_norm = dq_norm.get();
    r.k_norm = dk_norm.get();
    r.inv_freq = dinv_freq.get();
    r.q_out = path.q.get();
    if (c.fp8) {
      use_fp8_pools(r, path);
    } else {
      r.k_cache = path.k.get();
      r.v_cache = path.v.get();
    }
    r.num_tokens = seqs;
    r.num_heads = c.num_heads;
    r.num_kv_heads = c.num_kv_heads;
    r.head_dim = c.head_dim;
    r.block_size = block_size;
    r.eps = 1e-6f;
    return r;
  };
  // Splits planned for the power-of-two bucket of the longest context, as decode graphs plan them.
  const int num_sms = 132,
            planned_context =
                static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(2048, stride * block_size))));
  const size_t split_rows = static_cast<size_t>(decode_attention_max_split_rows(seqs, num_sms));
  DeviceArray<float> split_out(split_rows * c.num_heads * c.head_dim), split_lse(split_rows * c.num_heads);
  DeviceArray<uint32_t> counters(std::vector<uint32_t>(static_cast<size_t>(seqs) * c.num_kv_heads, 0));
  const auto attention_params = [&](Path& path) {
    DecodeAttentionParams p;
    p.q = path.q.get();
    p.k_cache = path.k.get();
    p.v_cache = path.v.get();
    if (c.fp8) {
      p.kv_dtype = KvCacheDtype::kFp8E4m3;
      use_fp8_pools(p, path);
    }
    p.pool_blocks = num_blocks;
    p.block_tables = dtables.get();
    p.table_rows = dtable_rows.get();
    p.q_rows = dq_rows.get();
    p.context_lens = dlens.get();
    p.out = path.out.get();
    p.split_out = split_out.get();
    p.split_lse = split_lse.get();
    p.merge_in_kernel = true;
    p.split_counters = counters.get();
    p.block_table_stride = stride;
    p.num_decode = seqs;
    p.num_heads = c.num_heads;
    p.num_kv_heads = c.num_kv_heads;
    p.head_dim = c.head_dim;
    p.block_size = block_size;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    return p;
  };
  DecodeAttentionPlan plan =
      plan_decode_attention(attention_params(fused), planned_context, test_device_with_sms(num_sms));
  plan.kernel = c.kernel;

  if ((c.kernel == DecodeAttentionKernel::kBulkCopy || c.kernel == DecodeAttentionKernel::kBulkCopyTwoStage) &&
      !decode_attention_bulk_copy_available(attention_params(fused), test_device()))
    GTEST_SKIP() << "the bulk-copy kernel needs an sm_90a build and a compute 9.0 device";
  launch_qk_norm_rope_cache_write(rope_params(unfused), test_stream());
  launch_decode_attention(attention_params(unfused), plan, test_stream());
  DecodeAttentionParams p = attention_params(fused);
  p.fuse_rope = true;
  p.rope = rope_params(fused);  // fused.q stays poisoned: the fused kernel must not read it
  launch_decode_attention(p, plan, test_stream());

  EXPECT_TRUE(same_bytes(fused.out.download(), unfused.out.download())) << "attention output";
  if (c.fp8) {
    EXPECT_TRUE(same_bytes(fused.k8.download(), unfused.k8.download())) << "fp8 K cache";
    EXPECT_TRUE(same_bytes(fused.v8.download(), unfused.v8.download())) << "fp8 V cache";
    EXPECT_TRUE(same_bytes(fused.ks.download(), unfused.ks.download())) << "K scales";
    EXPECT_TRUE(same_bytes(fused.vs.download(), unfused.vs.download())) << "V scales";
  } else {
    EXPECT_TRUE(same_bytes(fused.k.download(), unfused.k.download())) << "K cache";
    EXPECT_TRUE(same_bytes(fused.v.download(), unfused.v.download())) << "V cache";
  }
  // And the cache changed where the current tokens live (the comparison above is not of two untouched pools).
  if (!c.fp8) {
    EXPECT_FALSE(same_bytes(unfused.k.download(), k_bf16)) << "K of the current tokens written";
  }
}

std::string fused_case_name(const ::testing::TestParamInfo<FusedCase>& info) {
  const FusedCase& c = info.param;
  char name[80];
  const char* kernel = c.kernel == DecodeAttentionKernel::kBulkCopy           ? "bulk"
                       : c.kernel == DecodeAttentionKernel::kBulkCopyTwoStage ? "bulk2"
                       : c.kernel == DecodeAttentionKernel::kCpAsync          ? "cpasync"
                                                                              : "registers";
  std::snprintf(name, sizeof(name), "%s_d%d_h%d_kv%d_seqs%zu_%s", kernel, c.head_dim, c.num_heads, c.num_kv_heads,
                c.context_lens.size(), c.fp8 ? "fp8" : "bf16");
  return name;
}

std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> cases;
  constexpr auto kRegisters = DecodeAttentionKernel::kRegisters, kBulkCopy = DecodeAttentionKernel::kBulkCopy;
  for (bool fp8 : {false, true}) {
    cases.push_back({128, 32, 8, {70}, fp8, kRegisters});
    cases.push_back({128, 32, 8, {1025, 33}, fp8, kRegisters});
    cases.push_back({128, 8, 8, {17, 64}, fp8, kRegisters});
    cases.push_back({64, 16, 1, {1, 300}, fp8, kRegisters});
    cases.push_back({64, 12, 4, {129}, fp8, kRegisters});
    // kAuto's register batch (up to four sequences), and the kernel forced past it.
    cases.push_back({128, 32, 8, {70, 1, 1025, 64}, fp8, kRegisters});
    cases.push_back({128, 8, 8, {129, 17, 640}, fp8, kRegisters});
    cases.push_back({128, 32, 8, {70, 1, 1025, 64, 17, 640, 129, 2048}, fp8, kRegisters});
    cases.push_back({64, 12, 4, {129, 5, 191, 192, 193}, fp8, kRegisters});
  }
  // Current tokens first or last in a tile, in the prologue's tiles or later ones, with and without splits.
  constexpr auto kCpAsync = DecodeAttentionKernel::kCpAsync;
  for (bool fp8 : {false, true}) {
    cases.push_back({128, 32, 8, {70, 1, 129}, fp8, kCpAsync});
    cases.push_back({128, 8, 8, {17, 64, 1025, 2048}, fp8, kCpAsync});
    cases.push_back({64, 16, 1, {1, 300, 17, 129}, fp8, kCpAsync});
    cases.push_back({64, 12, 4, {129, 5, 191, 192, 193}, fp8, kCpAsync});
    cases.push_back({128, 64, 4, {640, 513, 64}, fp8, kCpAsync});
  }
  // The bulk-copy kernel over a bf16 cache with its 3-tile ring (kAuto's for 1-4 sequences of long contexts and from
  // 25 sequences on) and its 2-tile ring (kAuto's for 5 to 24 sequences: one tile in flight, so the current token's
  // tile is the prologue's only one or a later one).
  constexpr auto kTwoStage = DecodeAttentionKernel::kBulkCopyTwoStage;
  for (DecodeAttentionKernel kernel : {kBulkCopy, kTwoStage}) {
    cases.push_back({128, 32, 8, {4099}, false, kernel});
    cases.push_back({128, 32, 8, {70, 1, 64, 65, 300}, false, kernel});
    cases.push_back({128, 8, 8, {17, 64, 129, 1025, 2048}, false, kernel});
    cases.push_back({64, 16, 1, {1, 300, 17, 129, 1025, 64}, false, kernel});
    cases.push_back({64, 12, 4, {129, 5, 191, 192, 193}, false, kernel});
  }
  cases.push_back({128, 32, 8, {2049, 70}, false, kBulkCopy});
  std::vector<int> batch64(64);
  for (int s = 0; s < 64; ++s) batch64[static_cast<size_t>(s)] = 512 + (s * 37) % 129;
  cases.push_back({128, 32, 8, batch64, false, kBulkCopy});
  std::vector<int> batch16(16);
  for (int s = 0; s < 16; ++s) batch16[static_cast<size_t>(s)] = 960 + (s * 37) % 129;
  cases.push_back({128, 32, 8, batch16, false, kTwoStage});
  // Over an fp8 cache kBulkCopy runs the Hopper fp8 kernel (head_dim 128, groups up to 8), else the fp8 cp.async one.
  cases.push_back({128, 32, 8, {70, 1, 2049, 640}, true, kBulkCopy});
  cases.push_back({128, 8, 8, {17, 4099, 129}, true, kBulkCopy});
  cases.push_back({64, 32, 8, {70, 1, 64, 65, 300}, true, kBulkCopy});  // head_dim 64: the fp8 cp.async kernel
  cases.push_back({128, 32, 8, {70, 1, 64, 65, 300}, true, kBulkCopy});
  cases.push_back({128, 8, 8, {17, 64, 129, 1025, 2048}, true, kBulkCopy});
  cases.push_back({128, 24, 4, {129, 5, 191, 192, 193, 1}, true, kBulkCopy});
  cases.push_back({128, 64, 8, batch64, true, kBulkCopy});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedRopeTest, ::testing::ValuesIn(fused_cases()), fused_case_name);

}  // namespace
}  // namespace qinfer::cuda
