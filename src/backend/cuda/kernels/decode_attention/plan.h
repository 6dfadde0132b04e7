// The decode attention family's planning, GPU-free: which kernel a step runs and how its contexts are split, as pure
// functions of the batch's shape and a plain description of the GPU (no CUDA types, so the planner and its unit tests
// build without the toolkit). The launch (launch.h) takes the plan beside the kernel params.
#pragma once

#include "backend/kv_cache_dtype.h"

namespace qinfer::cuda {

// Which kernel runs a launch: the cp.async kernel (sm_80+), the Hopper bulk-copy kernel, or the register kernel, for
// either cache dtype. kBulkCopyTwoStage is the bf16 bulk-copy kernel with a 2-tile ring at 3 blocks per SM instead of
// 3 tiles at 2 (over an fp8 cache it runs as kBulkCopy). kAuto (decode_attention_auto_kernel): the register kernel for
// at most kDecodeAttentionRegisterBatch sequences whose planned context is within decode_attention_register_context;
// else the bulk-copy kernel where it can run (DecodeAttentionGpu::bulk_copy), over a bf16 cache the 2-stage one for at
// most kDecodeAttentionTwoStageBatch sequences; else the cp.async kernel (docs/CUDA_DESIGN.md, "Decode attention:
// which kernel", has the measurements behind the thresholds). Over an fp8 cache with head_dim 64 (no copy-engine
// swizzle lands its tile layout) or GQA groups above 8 (the bulk-copy kernel's tile step holds one block of 8 heads),
// kBulkCopy runs the cp.async fp8 kernel.
enum class DecodeAttentionKernel { kAuto, kCpAsync, kBulkCopy, kBulkCopyTwoStage, kRegisters };
constexpr int kDecodeAttentionRegisterBatch = 4;
// Up to this many sequences the 2-stage bulk-copy kernel's finer splits fill the GPU in one wave and win (measured:
// 8-24 sequences at 0.5-4 K, -1 to -6 % per step); from 32 on its one tile in flight per block loses (+9 %).
constexpr int kDecodeAttentionTwoStageBatch = 24;

// The longest planned context at which kAuto still runs the register kernel for `num_decode` sequences (1 to
// kDecodeAttentionRegisterBatch). The register kernel loads each split's keys once, without a pipeline: it wins while
// the splits are short, and the bulk-copy kernel's ring wins beyond (measured: 4 bf16 sequences in the 2 K bucket
// 3.13 against 3.25 ms per step, in the 4 K bucket 3.50 against 3.41, in the 16 K bucket 5.75 against 4.74).
int decode_attention_register_context(int num_decode, KvCacheDtype kv_dtype);

// What the planner reads of a step's decode batch.
struct DecodeAttentionShape {
  int num_decode = 0;  // decode sequences (one query token each)
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  KvCacheDtype kv_dtype = KvCacheDtype::kBf16;
};

// What the planner reads of the GPU.
struct DecodeAttentionGpu {
  int num_sms = 0;
  // The Hopper bulk-copy kernels can run over this cache: this build's sm_90a kernels on a compute 9.0 device and a
  // pool they can map (decode_attention_bulk_copy_available in launch.h decides it).
  bool bulk_copy = false;
};

// A step's decode attention plan: its kernel and its splits. Every split but the last of a sequence holds
// tokens_per_split keys; a sequence shorter than the planned context leaves its last splits idle.
struct DecodeAttentionPlan {
  DecodeAttentionKernel kernel = DecodeAttentionKernel::kAuto;  // kAuto: chosen at launch for planned_context
  int tokens_per_split = 0;                                     // multiple of 64
  int num_splits = 1;
  int planned_context = 0;  // the longest context the splits were planned for; 0: unknown, taken as short
};

// The kernel kAuto runs for `shape` with splits planned for `planned_context`.
DecodeAttentionKernel decode_attention_auto_kernel(const DecodeAttentionShape& shape, int planned_context,
                                                   const DecodeAttentionGpu& gpu);

// The kernel a launch of `plan` runs: kAuto's choice, and over an fp8 cache kBulkCopyTwoStage as kBulkCopy.
DecodeAttentionKernel decode_attention_resolved_kernel(const DecodeAttentionShape& shape,
                                                       const DecodeAttentionPlan& plan, const DecodeAttentionGpu& gpu);

// Whether a launch resolved to `kernel` runs the Hopper fp8 kernel: kBulkCopy over an fp8 cache with head_dim 128 and
// GQA groups of at most 8.
bool decode_attention_runs_fp8_bulk_copy(const DecodeAttentionShape& shape, DecodeAttentionKernel kernel);

// Plans a batch whose longest context is max_context_len: kAuto's kernel for it, and the split count with the least
// estimated time, counted in waves of resident blocks of that kernel times tiles per block (plus a per-block fill and
// merge cost; docs/CUDA_DESIGN.md, "Decode attention: the split plan").
DecodeAttentionPlan plan_decode_attention(const DecodeAttentionShape& shape, int max_context_len,
                                          const DecodeAttentionGpu& gpu);

// Upper bound of num_decode * num_splits over plans for at most max_decode sequences: sizes split_out / split_lse.
int decode_attention_max_split_rows(int max_decode, int num_sms);

}  // namespace qinfer::cuda
