// Attention of a step, planned once and run per layer. The plan fixes what every layer shares: the decode kernel and
// its splits, the prefill sequences, whether the decode kernel does the QK-norm / RoPE / cache write of its tokens
// itself (decode-only steps: one kernel fewer per layer, the same bits), and with an fp8 cache the groups of prefill
// sequences whose blocks are dequantised into a bf16 scratch for the bf16 prefill kernel (kv_gather_plan.h).
// run() binds one layer's cache and norm weights and launches: QK-norm + RoPE + K/V write (unless fused), decode
// attention, prefill attention.
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "backend/cuda/kv_pool.h"
#include "backend/cuda/step_plan.h"
#include "backend/cuda/workspace.h"
#include "model/config.h"

namespace qinfer::cuda {

struct AttentionPlan {
  DecodeAttentionParams decode;     // all but the layer's cache pointers (and rope's, when fused)
  DecodeAttentionPlan decode_plan;  // its kernel and splits (planned when the step has decode rows)
  PrefillAttentionParams prefill;   // all but the layer's cache pointers
  QkNormRopeCacheWriteParams rope;  // all but the layer's norm weights and cache pointers
  bool rope_in_decode = false;      // the decode kernel does rope's work (no separate launch)
};

struct AttentionLimits {
  int max_model_len = 0;
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
};

class Attention {
 public:
  // With an fp8 cache, allocates the prefill scratch: at least one sequence of max_model_len or one full batch of new
  // tokens (allocate it before the KV pool is sized, so that the pool takes what is left).
  Attention(const ModelConfig& config, KvCacheDtype kv_dtype, int block_size, const AttentionLimits& limits);

  int gather_scratch_blocks() const { return gather_scratch_blocks_; }
  size_t scratch_bytes() const { return gather_scratch_.bytes() + inv_freq_.bytes(); }

  // Plans the step's attention over `kv`, reading queries from and writing outputs to the workspace.
  AttentionPlan plan(const StepPlan& step, const KvPool& kv, const Workspace& workspace,
                     const DeviceCapabilities& device) const;

  // One layer's attention: q/k from workspace.qkv, output into workspace.attention. Marks the decode attention
  // kernel in stream.roles while a graph is captured.
  void run(const AttentionPlan& plan, const StepPlan& step, const KvLayerView& cache, const __nv_bfloat16* q_norm,
           const __nv_bfloat16* k_norm, const KernelStream& stream) const;

 private:
  // Prefill over the fp8 cache: per gather group, its blocks dequantised into the scratch, then the bf16 prefill kernel
  // over the scratch through the group's remapped tables.
  void run_fp8_prefill(const PrefillAttentionParams& prefill, const StepPlan& step, const KvLayerView& cache,
                       const KernelStream& stream) const;

  const ModelConfig& config_;
  int block_size_ = 0;
  DeviceBuffer inv_freq_;  // [head_dim / 2] RoPE frequencies theta^(-2i/head_dim)
  // fp8: the bf16 pool prefill attention reads, [K|V][gather_scratch_blocks_, num_kv_heads, block_size, head_dim]
  DeviceBuffer gather_scratch_;
  int gather_scratch_blocks_ = 0;
};

}  // namespace qinfer::cuda
