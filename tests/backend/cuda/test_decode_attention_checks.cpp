// launch_decode_attention refuses params whose modes lack the pointers they read, before touching the GPU (so these
// run everywhere): an fp8 kv_dtype without its fp8 pools, fuse_rope without rope's inputs, merge_in_kernel without
// counters, and plans that are not whole tiles.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention/launch.h"

namespace qinfer::cuda {
namespace {

// Each test's params: one bf16 sequence with every pointer its modes need set, at stand-in bytes that the checks
// compare with null and nothing reads.
class DecodeAttentionLaunchChecks : public ::testing::Test {
 protected:
  template <typename T>
  T* fake() {
    return reinterpret_cast<T*>(stand_in_);
  }

  DecodeAttentionParams valid_params() {
    DecodeAttentionParams p;
    p.q = fake<const __nv_bfloat16>();
    p.k_cache = p.v_cache = fake<const __nv_bfloat16>();
    p.block_tables = p.table_rows = p.q_rows = p.context_lens = fake<const int32_t>();
    p.out = fake<__nv_bfloat16>();
    p.split_out = p.split_lse = fake<float>();
    p.num_decode = 1;
    p.num_heads = 32;
    p.num_kv_heads = 8;
    p.head_dim = 128;
    p.block_size = 16;
    p.scale = 1.0f;
    return p;
  }

 private:
  alignas(16) uint8_t stand_in_[64] = {};
};

void launch(const DecodeAttentionParams& p, const DecodeAttentionPlan& plan) {
  const DeviceCapabilities device;
  launch_decode_attention(p, plan, KernelStream{.device = device});
}

constexpr DecodeAttentionPlan kOneSplit{.kernel = DecodeAttentionKernel::kCpAsync, .tokens_per_split = 64};

TEST_F(DecodeAttentionLaunchChecks, Fp8DtypeNeedsItsPools) {
  DecodeAttentionParams p = valid_params();
  p.kv_dtype = KvCacheDtype::kFp8E4m3;  // the bf16 pools are set, the fp8 ones are not
  EXPECT_DEATH(launch(p, kOneSplit), "fp8 cache \\(kv_dtype kFp8E4m3\\) needs k_fp8, v_fp8, k_scales and v_scales");
}

TEST_F(DecodeAttentionLaunchChecks, Bf16DtypeNeedsItsPools) {
  DecodeAttentionParams p = valid_params();
  p.k_cache = nullptr;
  EXPECT_DEATH(launch(p, kOneSplit), "bf16 cache \\(kv_dtype kBf16\\) needs k_cache and v_cache");
}

TEST_F(DecodeAttentionLaunchChecks, FuseRopeNeedsRopesInputs) {
  DecodeAttentionParams p = valid_params();
  p.fuse_rope = true;  // rope left empty
  EXPECT_DEATH(launch(p, kOneSplit), "fuse_rope needs rope's qkv");
}

TEST_F(DecodeAttentionLaunchChecks, MergeInKernelNeedsCounters) {
  DecodeAttentionParams p = valid_params();
  p.merge_in_kernel = true;
  EXPECT_DEATH(launch(p, {.kernel = DecodeAttentionKernel::kCpAsync, .tokens_per_split = 64, .num_splits = 4}),
               "merge_in_kernel needs split_counters");
}

TEST_F(DecodeAttentionLaunchChecks, SplitsNeedTheirScratch) {
  DecodeAttentionParams p = valid_params();
  p.split_out = nullptr;
  EXPECT_DEATH(launch(p, {.kernel = DecodeAttentionKernel::kCpAsync, .tokens_per_split = 64, .num_splits = 4}),
               "more than one split needs split_out and split_lse");
}

TEST_F(DecodeAttentionLaunchChecks, PlanIsWholeTiles) {
  EXPECT_DEATH(launch(valid_params(), {.kernel = DecodeAttentionKernel::kCpAsync, .tokens_per_split = 100}),
               "whole 64-token tiles");
  EXPECT_DEATH(launch(valid_params(), DecodeAttentionPlan{}), "whole 64-token tiles") << "an unplanned launch";
}

}  // namespace
}  // namespace qinfer::cuda
