// Decode attention planning on the host (no GPU needed): split plans and the kernel kAuto picks, for devices
// described by hand rather than queried, so they run in every CI job.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention/launch.h"

namespace qinfer::cuda {
namespace {

// An sm_89 device with `num_sms` SMs, as the planners see it: no Hopper kernels, so kAuto's ring kernel is cp.async.
DeviceCapabilities planning_device(int num_sms) {
  DeviceCapabilities device;
  device.name = "planning stand-in";
  device.compute_major = 8;
  device.compute_minor = 9;
  device.num_sms = num_sms;
  device.kernel_ptx_arch = 89;
  device.kernel_binary_arch = 89;
  device.shared_per_block_optin = 99 * 1024;
  device.fp8_conversions = true;
  return device;
}

// every plan covers the context with whole 64-token tiles, wastes less than one split, and fits the
// partial buffers sized by decode_attention_max_split_rows.
TEST(DecodeAttentionPlan, CoversContextAndFitsSplitRows) {
  const uint8_t fp8_pool_stand_in = 0;  // the planner only asks whether an fp8 cache is set
  for (int head_dim : {64, 128})
    for (int num_kv_heads : {1, 8})
      for (int num_sms : {1, 16, 132})
        for (int num_decode : {1, 3, 64, 256, 1024})
          for (int context : {1, 63, 64, 65, 1536, 8192, 32768, 262144})
            for (bool fp8 : {false, true}) {
              DecodeAttentionParams p;
              p.k_fp8 = fp8 ? &fp8_pool_stand_in : nullptr;
              p.num_decode = num_decode;
              p.num_heads = 4 * num_kv_heads;
              p.num_kv_heads = num_kv_heads;
              p.head_dim = head_dim;
              plan_decode_attention_splits(p, context, planning_device(num_sms));
              SCOPED_TRACE(::testing::Message()
                           << "head_dim " << head_dim << ", kv heads " << num_kv_heads << ", SMs " << num_sms
                           << ", sequences " << num_decode << ", context " << context << (fp8 ? ", fp8" : ", bf16"));
              ASSERT_GE(p.num_splits, 1);
              ASSERT_GT(p.tokens_per_split, 0);
              EXPECT_EQ(p.tokens_per_split % 64, 0);
              EXPECT_GE(static_cast<int64_t>(p.num_splits) * p.tokens_per_split, context);
              EXPECT_LT(static_cast<int64_t>(p.num_splits - 1) * p.tokens_per_split, context);
              EXPECT_LE(static_cast<int64_t>(num_decode) * p.num_splits,
                        decode_attention_max_split_rows(num_decode, num_sms));
            }
}

// kAuto runs the register kernel for 1-4 sequences up to decode_attention_register_context of the planned
// context and a ring kernel past it or for more sequences (cp.async on this device without Hopper kernels). Splits
// planned for a context record it.
TEST(DecodeAttentionPlan, AutoKernelFollowsBatchAndPlannedContext) {
  const uint8_t fp8_pool_stand_in = 0;
  for (bool fp8 : {false, true})
    for (int num_decode : {1, 2, 3, 4, 5, 64}) {
      DecodeAttentionParams p;
      p.k_fp8 = fp8 ? &fp8_pool_stand_in : nullptr;
      p.num_decode = num_decode;
      p.num_heads = 32;
      p.num_kv_heads = 8;
      p.head_dim = 128;
      SCOPED_TRACE(::testing::Message() << num_decode << " sequences" << (fp8 ? ", fp8" : ", bf16"));
      EXPECT_EQ(decode_attention_auto_kernel(p, planning_device(132)), num_decode <= kDecodeAttentionRegisterBatch
                                                                           ? DecodeAttentionKernel::kRegisters
                                                                           : DecodeAttentionKernel::kCpAsync)
          << "unplanned (context unknown)";
      for (int context : {64, 1024, 2048, 4096, 8192, 16384}) {
        plan_decode_attention_splits(p, context, planning_device(132));
        EXPECT_EQ(p.planned_context, context);
        const bool registers = num_decode <= kDecodeAttentionRegisterBatch &&
                               context <= decode_attention_register_context(num_decode, fp8);
        EXPECT_EQ(decode_attention_auto_kernel(p, planning_device(132)),
                  registers ? DecodeAttentionKernel::kRegisters : DecodeAttentionKernel::kCpAsync)
            << "context " << context;
      }
    }
  // The measured thresholds (docs/CUDA_DESIGN.md, "Decode attention: which kernel"): bf16 3-4 sequences leave the
  // register kernel past 2 K.
  EXPECT_EQ(decode_attention_register_context(4, false), 2048);
  EXPECT_EQ(decode_attention_register_context(2, false), 8192);
  EXPECT_EQ(decode_attention_register_context(4, true), 8192);
}

}  // namespace
}  // namespace qinfer::cuda
