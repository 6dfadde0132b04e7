// Paged decode attention (one query token per sequence) in the flash-decoding style: the context is split across
// blocks, each block reads K/V of one KV head once for all query heads of its GQA group (the group's heads are the
// rows of a tensor-core tile), and the splits are merged through their log-sum-exp: by the last split block of each
// (sequence, KV head) when `split_counters` is given, else by a second kernel. For each cache dtype two kernels share
// that structure and differ in how K/V tiles reach shared memory: 16-byte cp.async per thread (sm_80+), or on Hopper
// the bulk tensor copy engine over the paged pool (bulk_copy_sm90.cu, fp8_bulk_copy_sm90.cu;
// docs/CUDA_DESIGN.md, "Decode attention: the family", says why and what each reaches).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"

namespace qinfer::cuda {

struct DecodeAttentionParams {
  const __nv_bfloat16* q = nullptr;        // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  const __nv_bfloat16* v_cache = nullptr;  // same layout
  // An fp8 cache instead (KvCacheDtype::kFp8E4m3) when k_fp8 is set; k_cache / v_cache are then unused.
  const uint8_t* k_fp8 = nullptr;   // [num_blocks, num_kv_heads, block_size, head_dim] E4M3
  const uint8_t* v_fp8 = nullptr;   // same layout
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
  // [num_decode, num_kv_heads] arrival counters, zeroed once when allocated; every launch leaves them zero again.
  // Optional: when null, a second kernel merges the splits.
  uint32_t* split_counters = nullptr;
  int block_table_stride = 0;
  int num_decode = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int block_size = 0;
  int tokens_per_split = 0;  // multiple of 64
  int num_splits = 1;
  // The longest context the splits were planned for (plan_decode_attention_splits sets it); kAuto picks the kernel by
  // it. 0: unknown, taken as short.
  int planned_context = 0;
  float scale = 0;  // head_dim^-0.5
  // rope.qkv set (every kernel takes it): the kernel does the QK-norm / RoPE / cache write of its decode tokens
  // itself, with the QK-norm/RoPE kernel's own per-head math (bit-identical q and K/V): each block its GQA group's
  // query heads from rope.qkv (q above is unused), the block holding a sequence's current token that token's K and V
  // into rope's cache pointers (the pools above, writable). rope.num_tokens is unused.
  QkNormRopeCacheWriteParams rope;
};

// Which kernel runs a launch: the cp.async kernel (sm_80+), the Hopper bulk-copy kernel, or the register kernel, for
// either cache dtype. kBulkCopyTwoStage is the bf16 bulk-copy kernel with a 2-tile ring at 3 blocks per SM instead of
// 3 tiles at 2 (over an fp8 cache it runs as kBulkCopy). kAuto (decode_attention_auto_kernel): the register kernel for
// at most kDecodeAttentionRegisterBatch sequences whose planned context is within decode_attention_register_context;
// else the bulk-copy kernel where it can run (decode_attention_bulk_copy_available), over a bf16 cache the 2-stage one
// for at most kDecodeAttentionTwoStageBatch sequences; else the cp.async kernel (docs/CUDA_DESIGN.md, "Decode
// attention: which kernel", has the measurements behind the thresholds). Over an fp8 cache with
// head_dim 64 (no copy-engine swizzle lands its tile layout) or GQA groups above 8 (the bulk-copy kernel's tile step
// holds one block of 8 heads), kBulkCopy runs the cp.async fp8 kernel.
enum class DecodeAttentionKernel { kAuto, kCpAsync, kBulkCopy, kBulkCopyTwoStage, kRegisters };
constexpr int kDecodeAttentionRegisterBatch = 4;
// Up to this many sequences the 2-stage bulk-copy kernel's finer splits fill the GPU in one wave and win (measured:
// 8-24 sequences at 0.5-4 K, -1 to -6 % per step); from 32 on its one tile in flight per block loses (+9 %).
constexpr int kDecodeAttentionTwoStageBatch = 24;

// The longest planned context at which kAuto still runs the register kernel for `num_decode` sequences (1 to
// kDecodeAttentionRegisterBatch). The register kernel loads each split's keys once, without a pipeline: it wins while
// the splits are short, and the bulk-copy kernel's ring wins beyond (measured: 4 bf16 sequences in the 2 K bucket
// 3.13 against 3.25 ms per step, in the 4 K bucket 3.50 against 3.41, in the 16 K bucket 5.75 against 4.74).
int decode_attention_register_context(int num_decode, bool fp8);

// The kernel a kAuto launch over `params` runs (its splits planned).
DecodeAttentionKernel decode_attention_auto_kernel(const DecodeAttentionParams& params,
                                                   const DeviceCapabilities& device);

// Picks tokens_per_split / num_splits for a batch: the split count with the least estimated time, counted in waves
// of resident blocks times tiles per block (plus a per-block fill and merge cost). Resident blocks depend on the
// cache's dtype: set k_fp8 before planning for an fp8 cache.
void plan_decode_attention_splits(DecodeAttentionParams& params, int max_context_len, const DeviceCapabilities& device);

// Upper bound of num_decode * num_splits over plans for at most max_decode sequences: sizes split_out / split_lse.
int decode_attention_max_split_rows(int max_decode, int num_sms);

// True when the device runs this build's sm_90a kernels (DeviceCapabilities::hopper_kernels) and params.pool_blocks is
// known.
bool decode_attention_bulk_copy_available(const DecodeAttentionParams& params, const DeviceCapabilities& device);

void launch_decode_attention(const DecodeAttentionParams& params, const KernelStream& stream,
                             DecodeAttentionKernel kernel = DecodeAttentionKernel::kAuto);

// The fp8-cache kernel alone (fp8_cp_async.cu), without the merge kernel: launch_decode_attention's part. Each
// warp builds fp16 tensor-core fragments straight from the E4M3 bytes (fp8_fragments.cuh), with the
// scales folded into scores and probabilities (fp8_tile.cuh).
void launch_decode_attention_fp8(const DecodeAttentionParams& params, const KernelStream& stream);

// The Hopper fp8-cache kernel alone (fp8_bulk_copy_sm90.cu): the fp8 kernel's tile step over tiles and scales
// brought in by the bulk copy engine. Needs head_dim 128, GQA groups of at most 8 and
// decode_attention_bulk_copy_available(params).
void launch_decode_attention_fp8_bulk_copy(const DecodeAttentionParams& params, const KernelStream& stream);

// The register kernel alone (registers.cu; bf16 cache, sm_80+): K/V go from the paged cache straight
// into mma fragments, without a shared-memory tile ring, and the first tile is loaded before waiting for the previous
// kernel. Needs split_counters when num_splits > 1 or the merge kernel after it.
void launch_decode_attention_registers(const DecodeAttentionParams& params, const KernelStream& stream);

// The same over an fp8 cache (fp8_registers.cu): the fp8 kernels' warp step on bytes loaded straight
// into registers.
void launch_decode_attention_fp8_registers(const DecodeAttentionParams& params, const KernelStream& stream);

// The Hopper attention kernel alone (bulk_copy_sm90.cu), without the merge kernel that splits need when
// split_counters is null: launch_decode_attention's part. `ring_stages`: 3 (kBulkCopy) or 2 (kBulkCopyTwoStage).
// Needs decode_attention_bulk_copy_available(params).
void launch_decode_attention_bulk_copy(const DecodeAttentionParams& params, const KernelStream& stream,
                                       int ring_stages = 3);

}  // namespace qinfer::cuda
