// The decode attention planner (kernels/decode_attention/plan.h) on plain inputs: the kernel kAuto picks and the split
// plans, for GPUs described by hand. GPU-free: built and run in every build, with or without CUDA.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention/plan.h"

namespace qinfer::cuda {
namespace {

constexpr KvCacheDtype kBf16 = KvCacheDtype::kBf16, kFp8 = KvCacheDtype::kFp8E4m3;

// Qwen3-4B's attention (32 query heads, 8 KV heads, head_dim 128) for `num_decode` sequences.
DecodeAttentionShape qwen3_shape(int num_decode, KvCacheDtype kv_dtype) {
  return {.num_decode = num_decode, .num_heads = 32, .num_kv_heads = 8, .head_dim = 128, .kv_dtype = kv_dtype};
}

// An H200-sized GPU (132 SMs) with or without the Hopper bulk-copy kernels.
DecodeAttentionGpu gpu(bool bulk_copy, int num_sms = 132) { return {.num_sms = num_sms, .bulk_copy = bulk_copy}; }

const char* dtype_name(KvCacheDtype dtype) { return dtype == kFp8 ? "fp8" : "bf16"; }

// Every plan covers the context with whole 64-token tiles, wastes less than one split, and fits the partial buffers
// sized by decode_attention_max_split_rows.
TEST(DecodeAttentionPlan, CoversContextAndFitsSplitRows) {
  for (int head_dim : {64, 128})
    for (int num_kv_heads : {1, 8})
      for (int num_sms : {1, 16, 132})
        for (int num_decode : {1, 3, 64, 256, 1024})
          for (int context : {1, 63, 64, 65, 1536, 8192, 32768, 262144})
            for (KvCacheDtype dtype : {kBf16, kFp8})
              for (bool bulk_copy : {false, true}) {
                const DecodeAttentionShape shape{.num_decode = num_decode,
                                                 .num_heads = 4 * num_kv_heads,
                                                 .num_kv_heads = num_kv_heads,
                                                 .head_dim = head_dim,
                                                 .kv_dtype = dtype};
                const DecodeAttentionPlan plan = plan_decode_attention(shape, context, gpu(bulk_copy, num_sms));
                SCOPED_TRACE(::testing::Message()
                             << "head_dim " << head_dim << ", kv heads " << num_kv_heads << ", SMs " << num_sms
                             << ", sequences " << num_decode << ", context " << context << ", " << dtype_name(dtype)
                             << (bulk_copy ? ", bulk copy" : ""));
                ASSERT_GE(plan.num_splits, 1);
                ASSERT_GT(plan.tokens_per_split, 0);
                EXPECT_EQ(plan.tokens_per_split % 64, 0);
                EXPECT_GE(static_cast<int64_t>(plan.num_splits) * plan.tokens_per_split, context);
                EXPECT_LT(static_cast<int64_t>(plan.num_splits - 1) * plan.tokens_per_split, context);
                EXPECT_LE(static_cast<int64_t>(num_decode) * plan.num_splits,
                          decode_attention_max_split_rows(num_decode, num_sms));
                EXPECT_EQ(plan.planned_context, context);
                EXPECT_EQ(plan.kernel, decode_attention_auto_kernel(shape, context, gpu(bulk_copy, num_sms)));
              }
}

// kAuto runs the register kernel for 1-4 sequences up to decode_attention_register_context of the planned context
// (inclusive) and a ring kernel past it or for more sequences: cp.async without the Hopper kernels.
TEST(DecodeAttentionPlan, RegisterKernelWithinBatchAndContext) {
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (int num_decode : {1, 2, 3, 4, 5, 64}) {
      const DecodeAttentionShape shape = qwen3_shape(num_decode, dtype);
      SCOPED_TRACE(::testing::Message() << num_decode << " sequences, " << dtype_name(dtype));
      const bool small_batch = num_decode <= kDecodeAttentionRegisterBatch;
      EXPECT_EQ(decode_attention_auto_kernel(shape, 0, gpu(false)),
                small_batch ? DecodeAttentionKernel::kRegisters : DecodeAttentionKernel::kCpAsync)
          << "unplanned (context unknown)";
      for (int context : {1, 64, 1024, 2048, 2049, 4096, 8192, 8193, 16384, 262144}) {
        const bool registers = small_batch && context <= decode_attention_register_context(num_decode, dtype);
        EXPECT_EQ(plan_decode_attention(shape, context, gpu(false)).kernel,
                  registers ? DecodeAttentionKernel::kRegisters : DecodeAttentionKernel::kCpAsync)
            << "context " << context;
      }
    }
}

// The measured thresholds (docs/CUDA_DESIGN.md, "Decode attention: which kernel"): 1-2 sequences keep the register
// kernel up to 8 K over bf16 and 16 K over fp8; 3-4 up to 2 K over bf16 and 8 K over fp8.
TEST(DecodeAttentionPlan, RegisterContextThresholds) {
  EXPECT_EQ(kDecodeAttentionRegisterBatch, 4);
  for (int num_decode : {1, 2}) {
    EXPECT_EQ(decode_attention_register_context(num_decode, kBf16), 8192);
    EXPECT_EQ(decode_attention_register_context(num_decode, kFp8), 16384);
    EXPECT_EQ(plan_decode_attention(qwen3_shape(num_decode, kFp8), 16384, gpu(true)).kernel,
              DecodeAttentionKernel::kRegisters);
    EXPECT_EQ(plan_decode_attention(qwen3_shape(num_decode, kFp8), 32768, gpu(true)).kernel,
              DecodeAttentionKernel::kBulkCopy);
  }
  for (int num_decode : {3, 4}) {
    EXPECT_EQ(decode_attention_register_context(num_decode, kBf16), 2048);
    EXPECT_EQ(decode_attention_register_context(num_decode, kFp8), 8192);
  }
}

// With the Hopper kernels, kAuto's ring kernel over a bf16 cache is the 2-stage bulk-copy kernel for 5 to
// kDecodeAttentionTwoStageBatch sequences and the 3-stage one beyond (and for 1-4 sequences past the register
// context); over fp8 the bulk-copy kernel at every batch.
TEST(DecodeAttentionPlan, TwoStageBulkCopyUpToItsBatchOverBf16) {
  EXPECT_EQ(kDecodeAttentionTwoStageBatch, 24);
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (int num_decode : {5, 16, kDecodeAttentionTwoStageBatch, kDecodeAttentionTwoStageBatch + 1, 64, 256}) {
      const bool two_stage = dtype == kBf16 && num_decode <= kDecodeAttentionTwoStageBatch;
      EXPECT_EQ(plan_decode_attention(qwen3_shape(num_decode, dtype), 1024, gpu(true)).kernel,
                two_stage ? DecodeAttentionKernel::kBulkCopyTwoStage : DecodeAttentionKernel::kBulkCopy)
          << num_decode << " sequences, " << dtype_name(dtype);
    }
  EXPECT_EQ(plan_decode_attention(qwen3_shape(4, kBf16), 4096, gpu(true)).kernel,
            DecodeAttentionKernel::kBulkCopyTwoStage);
}

// Without the Hopper kernels (sm_80/89, or no pool to map) every ring kernel is the cp.async one.
TEST(DecodeAttentionPlan, NoHopperKernelsRunsCpAsync) {
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (int num_decode : {5, 16, 64, 1024})
      EXPECT_EQ(plan_decode_attention(qwen3_shape(num_decode, dtype), 4096, gpu(false)).kernel,
                DecodeAttentionKernel::kCpAsync)
          << num_decode << " sequences, " << dtype_name(dtype);
}

// Over an fp8 cache, kBulkCopy runs the Hopper fp8 kernel only at head_dim 128 with GQA groups of at most 8; head_dim
// 64 and larger groups fall back to the cp.async fp8 kernel. A 2-stage request runs as kBulkCopy there.
TEST(DecodeAttentionPlan, Fp8BulkCopyFallbacks) {
  const auto shape = [](int head_dim, int num_heads, int num_kv_heads, KvCacheDtype dtype) {
    return DecodeAttentionShape{.num_decode = 64,
                                .num_heads = num_heads,
                                .num_kv_heads = num_kv_heads,
                                .head_dim = head_dim,
                                .kv_dtype = dtype};
  };
  constexpr auto kBulkCopy = DecodeAttentionKernel::kBulkCopy;
  EXPECT_TRUE(decode_attention_runs_fp8_bulk_copy(shape(128, 32, 8, kFp8), kBulkCopy));
  EXPECT_TRUE(decode_attention_runs_fp8_bulk_copy(shape(128, 8, 1, kFp8), kBulkCopy)) << "a group of 8";
  EXPECT_FALSE(decode_attention_runs_fp8_bulk_copy(shape(128, 16, 1, kFp8), kBulkCopy)) << "a group of 16";
  EXPECT_FALSE(decode_attention_runs_fp8_bulk_copy(shape(64, 32, 8, kFp8), kBulkCopy)) << "head_dim 64";
  EXPECT_FALSE(decode_attention_runs_fp8_bulk_copy(shape(128, 32, 8, kBf16), kBulkCopy)) << "a bf16 cache";
  EXPECT_FALSE(decode_attention_runs_fp8_bulk_copy(shape(128, 32, 8, kFp8), DecodeAttentionKernel::kCpAsync));

  DecodeAttentionPlan plan{.kernel = DecodeAttentionKernel::kBulkCopyTwoStage, .tokens_per_split = 64};
  EXPECT_EQ(decode_attention_resolved_kernel(shape(128, 32, 8, kFp8), plan, gpu(true)), kBulkCopy);
  EXPECT_EQ(decode_attention_resolved_kernel(shape(128, 32, 8, kBf16), plan, gpu(true)),
            DecodeAttentionKernel::kBulkCopyTwoStage);
  plan.kernel = DecodeAttentionKernel::kAuto;
  plan.planned_context = 4096;
  EXPECT_EQ(decode_attention_resolved_kernel(shape(128, 32, 8, kFp8), plan, gpu(true)), kBulkCopy)
      << "kAuto: chosen for the planned context";
}

// The plan follows the kernel's residency: 16 sequences x 1 K (128 (sequence, KV head) pairs, 16 tiles) take 3 splits
// of 6 tiles at the 2-stage kernel's 3 blocks per SM (384 blocks, one wave of 396), where 2 blocks per SM would take
// 2 of 8 (256 of 264).
TEST(DecodeAttentionPlan, SplitsFollowTheKernelsResidency) {
  const DecodeAttentionPlan two_stage = plan_decode_attention(qwen3_shape(16, kBf16), 1024, gpu(true));
  EXPECT_EQ(two_stage.kernel, DecodeAttentionKernel::kBulkCopyTwoStage);
  EXPECT_EQ(two_stage.num_splits, 3);
  EXPECT_EQ(two_stage.tokens_per_split, 6 * 64);
  EXPECT_EQ(plan_decode_attention(qwen3_shape(16, kBf16), 1024, gpu(false)).num_splits, 2) << "cp.async";
}

// At batch 1 a longer context never takes fewer splits, and long ones are split many ways to fill the GPU.
TEST(DecodeAttentionPlan, LongContextsAtBatchOneTakeMoreSplits) {
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (bool bulk_copy : {false, true}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << (bulk_copy ? ", bulk copy" : ""));
      int previous_splits = 1;
      for (int context = 64; context <= 262144; context *= 2) {
        const DecodeAttentionPlan plan = plan_decode_attention(qwen3_shape(1, dtype), context, gpu(bulk_copy));
        EXPECT_GE(plan.num_splits, previous_splits) << "context " << context;
        previous_splits = plan.num_splits;
      }
      EXPECT_GT(plan_decode_attention(qwen3_shape(1, dtype), 8192, gpu(bulk_copy)).num_splits, 8);
      EXPECT_GT(plan_decode_attention(qwen3_shape(1, dtype), 262144, gpu(bulk_copy)).num_splits,
                plan_decode_attention(qwen3_shape(1, dtype), 8192, gpu(bulk_copy)).num_splits);
    }
}

// A batch whose (sequence, KV head) blocks fill the GPU on their own is not split.
TEST(DecodeAttentionPlan, FullBatchTakesOneSplit) {
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (bool bulk_copy : {false, true})
      for (int context : {640, 1536, 8192}) {
        const DecodeAttentionPlan plan = plan_decode_attention(qwen3_shape(256, dtype), context, gpu(bulk_copy));
        EXPECT_EQ(plan.num_splits, 1) << dtype_name(dtype) << (bulk_copy ? ", bulk copy" : "") << ", context "
                                      << context;
        EXPECT_EQ(plan.tokens_per_split, (context + 63) / 64 * 64);
      }
}

// Edges: one key is one tile in one split; the longest native context (262144) stays within the split rows.
TEST(DecodeAttentionPlan, ContextEdges) {
  for (KvCacheDtype dtype : {kBf16, kFp8})
    for (int num_decode : {1, 4, 64}) {
      const DecodeAttentionPlan one_key = plan_decode_attention(qwen3_shape(num_decode, dtype), 1, gpu(true));
      EXPECT_EQ(one_key.num_splits, 1);
      EXPECT_EQ(one_key.tokens_per_split, 64);
      const DecodeAttentionPlan longest = plan_decode_attention(qwen3_shape(num_decode, dtype), 262144, gpu(true));
      EXPECT_GE(static_cast<int64_t>(longest.num_splits) * longest.tokens_per_split, 262144);
      EXPECT_LE(num_decode * longest.num_splits, decode_attention_max_split_rows(num_decode, 132));
    }
  EXPECT_EQ(decode_attention_max_split_rows(8, 132), 8 + 4 * 132);
}

}  // namespace
}  // namespace qinfer::cuda
