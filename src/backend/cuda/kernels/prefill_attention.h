// Causal prefill attention over the paged KV cache on tensor cores (online softmax in fp32). Queries of a sequence are
// its new tokens at positions [num_cached, num_cached + num_tokens); keys are read through the block table, so cached
// prefixes and earlier chunks are attended to. The new tokens' K/V must already be in the cache.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/prefill_attention_plan.h"

namespace qinfer::cuda {

struct PrefillAttentionParams {
  const __nv_bfloat16* q = nullptr;        // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  const __nv_bfloat16* v_cache = nullptr;  // same layout
  const int32_t* block_tables = nullptr;   // [num_sequences, block_table_stride]
  const int32_t* table_rows = nullptr;     // [num_prefill] row of block_tables per prefill sequence
  const int32_t* q_starts = nullptr;       // [num_prefill] first token row of the sequence in q / out
  const int32_t* q_lens = nullptr;         // [num_prefill] new tokens
  const int32_t* cached_lens = nullptr;    // [num_prefill] tokens before them in the cache
  __nv_bfloat16* out = nullptr;            // [num_tokens, num_heads, head_dim]
  int block_table_stride = 0;
  int num_prefill = 0;
  int max_q_len = 0;  // largest q_lens entry: sizes the grid
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int block_size = 0;
  int64_t pool_blocks = 0;  // blocks in k_cache / v_cache (the wgmma kernel maps them for the bulk copy engine)
  float scale = 0;
  // Key splits (wgmma kernel): a short chunk after a long context (a question about a cached document, the tail of a
  // long prompt cut small beside decodes, a verify step) has few query blocks, and num_heads x query blocks leaves
  // most SMs idle while each block walks the whole context; a grid of a few waves leaves most of its last one idle.
  // Each query block's keys are then split over kv_splits blocks (prefill_attention_kv_splits) that write normalised
  // partial rows and their log2-sum-exps here, and a merge kernel combines them into `out`. split_rows_capacity 0:
  // never split.
  float* split_out = nullptr;   // [split_rows_capacity, num_heads, head_dim] fp32; row split * num_tokens + token
  float* split_lse = nullptr;   // [split_rows_capacity, num_heads] (log2 domain; -inf: no key in that split)
  int split_rows_capacity = 0;  // rows of split_out
  int num_tokens = 0;           // rows of q / out
  int max_context_len = 0;      // largest cached_lens + q_lens entry: plans the splits
  int kv_splits = 1;            // set by the launcher from prefill_attention_kv_splits
};

// plan_prefill_attention_kv_splits (prefill_attention_plan.h) for this launch; 1 without split buffers.
int prefill_attention_kv_splits(const PrefillAttentionParams& params, int num_sms);

// Runs the wgmma kernel where it is available and the block size is a multiple of 16, else the mma.sync one.
void launch_prefill_attention(const PrefillAttentionParams& params, const KernelStream& stream);

// The kernels behind it (tests and benchmarks run each). mma.sync: sm_80 and later, 8 warps x 16 query rows, 64-key
// tiles. wgmma (prefill_attention_sm90.cu): FlashAttention-3 structure, present when the build includes sm_90a and the
// device is compute capability 9.0; it needs block sizes that are multiples of 16 and throws elsewhere.
void launch_prefill_attention_mma_sync(const PrefillAttentionParams& params, const KernelStream& stream);
bool prefill_attention_wgmma_available(const DeviceCapabilities& device);
void launch_prefill_attention_wgmma(const PrefillAttentionParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
