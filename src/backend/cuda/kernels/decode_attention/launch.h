// Paged decode attention (one query token per sequence) in the flash-decoding style: the context is split across
// blocks, each block reads K/V of one KV head once for all query heads of its GQA group (the group's heads are the
// rows of a tensor-core tile), and the splits are merged through their log-sum-exp: by the last split block of each
// (sequence, KV head) with merge_in_kernel, else by a second kernel. For each cache dtype two kernels share that
// structure and differ in how K/V tiles reach shared memory: 16-byte cp.async per thread (sm_80+), or on Hopper the
// bulk tensor copy engine over the paged pool (bulk_copy_sm90.cu, fp8_bulk_copy_sm90.cu); a register kernel per dtype
// serves small batches (docs/CUDA_DESIGN.md, "Decode attention: the family", says why and what each reaches). Which
// kernel runs and how contexts are split is planned without the GPU (plan.h); a launch takes the params and the plan.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/decode_attention/plan.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "backend/kv_cache_dtype.h"

namespace qinfer::cuda {

struct DecodeAttentionParams {
  const __nv_bfloat16* q = nullptr;  // [num_tokens, num_heads, head_dim]
  // The cache the kernels read: bf16 pools (k_cache / v_cache) or E4M3 pools with their scales (k_fp8 ... v_scales);
  // the other dtype's pointers are unused.
  KvCacheDtype kv_dtype = KvCacheDtype::kBf16;
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  const __nv_bfloat16* v_cache = nullptr;  // same layout
  const uint8_t* k_fp8 = nullptr;          // [num_blocks, num_kv_heads, block_size, head_dim] E4M3
  const uint8_t* v_fp8 = nullptr;          // same layout
  const float* k_scales = nullptr;  // [num_blocks, num_kv_heads, block_size]: element value = float(byte) * scale
  const float* v_scales = nullptr;  // same layout
  // num_blocks of the cache pools: the bounds of the Hopper kernels' tensor maps. 0 (unknown): cp.async kernel only.
  int64_t pool_blocks = 0;
  const int32_t* block_tables = nullptr;  // [num_sequences, block_table_stride]
  const int32_t* table_rows = nullptr;    // [num_decode] row of block_tables for each decode sequence
  const int32_t* q_rows = nullptr;        // [num_decode] token row of its query in q and out
  const int32_t* context_lens = nullptr;  // [num_decode] cached tokens including the current one
  __nv_bfloat16* out = nullptr;           // [num_tokens, num_heads, head_dim]
  float* split_out = nullptr;             // [num_decode, num_heads, num_splits, head_dim] when num_splits > 1
  float* split_lse = nullptr;             // [num_decode, num_heads, num_splits] (log2 domain)
  // How the splits of a sequence are merged: by the last of its split blocks to finish, counted in split_counters
  // (merge_in_kernel), or by a second kernel.
  bool merge_in_kernel = false;
  // [num_decode, num_kv_heads] arrival counters, zeroed once when allocated; every launch leaves them zero again.
  uint32_t* split_counters = nullptr;
  int block_table_stride = 0;
  int num_decode = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int block_size = 0;
  float scale = 0;  // head_dim^-0.5
  // fuse_rope (every kernel takes it): the kernel does the QK-norm / RoPE / cache write of its decode tokens itself,
  // with the QK-norm/RoPE kernel's own per-head math (bit-identical q and K/V): each block its GQA group's query heads
  // from rope.qkv (q above is unused), the block holding a sequence's current token that token's K and V into rope's
  // cache pointers (the pools above, writable). rope.num_tokens is unused; without fuse_rope, rope is unused.
  bool fuse_rope = false;
  QkNormRopeCacheWriteParams rope;
};

// The planner's view of a launch's batch.
DecodeAttentionShape decode_attention_shape(const DecodeAttentionParams& params);

// True when the device runs this build's sm_90a kernels (DeviceCapabilities::hopper_kernels) and params.pool_blocks is
// known, with a block size the copy boxes divide and pools the tensor maps can take.
bool decode_attention_bulk_copy_available(const DecodeAttentionParams& params, const DeviceCapabilities& device);

// The planner's view of `device` for a launch over params' cache.
DecodeAttentionGpu decode_attention_gpu(const DecodeAttentionParams& params, const DeviceCapabilities& device);

// plan_decode_attention for params' batch on `device`.
DecodeAttentionPlan plan_decode_attention(const DecodeAttentionParams& params, int max_context_len,
                                          const DeviceCapabilities& device);

// Runs plan.kernel (kAuto: chosen for plan.planned_context) with plan's splits, then the merge kernel when splits are
// not merged in the kernel. Checks that params' modes have their pointers (an fp8 kv_dtype its fp8 pools and scales,
// fuse_rope its rope inputs, merge_in_kernel its counters) and that the plan fits the family.
void launch_decode_attention(const DecodeAttentionParams& params, const DecodeAttentionPlan& plan,
                             const KernelStream& stream);

}  // namespace qinfer::cuda
