#include "backend/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/kv_dequant_gather.h"

namespace qinfer::cuda {

using bf16 = __nv_bfloat16;

Attention::Attention(const ModelConfig& c, KvCacheDtype kv_dtype, int block_size, const AttentionLimits& limits)
    : config_(c), block_size_(block_size) {
  std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = static_cast<float>(1.0 / std::pow(c.rope_theta, 2.0 * static_cast<double>(i) / c.head_dim));
  inv_freq_ = DeviceBuffer(inv_freq.size() * 4, "RoPE table");
  CUDA_CHECK(cudaMemcpy(inv_freq_.data(), inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  if (kv_dtype == KvCacheDtype::kFp8E4m3) {
    const int64_t sequence_blocks = (limits.max_model_len + block_size - 1) / block_size;
    const int64_t batch_blocks = (limits.max_num_batched_tokens + block_size - 1) / block_size + limits.max_num_seqs;
    gather_scratch_blocks_ = static_cast<int>(std::max(sequence_blocks, batch_blocks));
    gather_scratch_ = DeviceBuffer(
        static_cast<size_t>(gather_scratch_blocks_) * 2 * c.num_kv_heads * block_size * c.head_dim * sizeof(bf16),
        "fp8 KV prefill scratch");
  }
}

AttentionPlan Attention::plan(const StepPlan& step, const KvPool& kv, const Workspace& w,
                              const DeviceCapabilities& device) const {
  const ModelConfig& c = config_;
  const BatchPlan& h = step.host;
  const DeviceBatch& d = step.device;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  AttentionPlan plan;

  DecodeAttentionParams& decode = plan.decode;
  decode.q = w.q.as<bf16>();
  decode.block_tables = d.block_tables;
  decode.table_rows = d.decode_table_rows;
  decode.q_rows = d.decode_q_rows;
  decode.context_lens = d.decode_context_lens;
  decode.out = w.attention.as<bf16>();
  decode.split_out = w.split_out.as<float>();
  decode.split_lse = w.split_lse.as<float>();
  decode.merge_in_kernel = true;
  decode.split_counters = w.split_counters.as<uint32_t>();
  decode.block_table_stride = d.block_table_stride;
  decode.num_decode = static_cast<int>(h.decode_q_rows.size());
  decode.num_heads = c.num_heads;
  decode.num_kv_heads = c.num_kv_heads;
  decode.head_dim = c.head_dim;
  decode.block_size = kv.block_size();
  decode.pool_blocks = kv.pool_blocks();  // the pool as the Hopper kernels' tensor maps bind it, scratch block included
  decode.scale = scale;
  kv.layer(0).bind(decode);  // the planner asks whether the bulk-copy kernels can map the pool
  if (decode.num_decode > 0) {
    plan.decode_plan = plan_decode_attention(decode, step.split_context, device);
    QINFER_CHECK(decode.num_decode * plan.decode_plan.num_splits <= w.max_split_rows);
  }

  PrefillAttentionParams& prefill = plan.prefill;
  prefill.q = w.q.as<bf16>();
  prefill.block_tables = d.block_tables;
  prefill.table_rows = d.prefill_table_rows;
  prefill.q_starts = d.prefill_q_starts;
  prefill.q_lens = d.prefill_q_lens;
  prefill.cached_lens = d.prefill_cached_lens;
  prefill.out = w.attention.as<bf16>();
  prefill.block_table_stride = d.block_table_stride;
  prefill.num_prefill = static_cast<int>(h.prefill_q_lens.size());
  prefill.max_q_len = h.max_prefill_q_len;
  prefill.num_heads = c.num_heads;
  prefill.num_kv_heads = c.num_kv_heads;
  prefill.head_dim = c.head_dim;
  prefill.block_size = kv.block_size();
  prefill.pool_blocks = kv.pool_blocks();
  prefill.scale = scale;
  // The key splits' partials go to the MLP's buffers, which hold nothing while attention runs: gate_up is written by
  // the layer's gate/up projection and read by SwiGLU, `activation` written by SwiGLU and read by down, both after it.
  prefill.split_out = w.gate_up.as<float>();
  prefill.split_lse = w.activation.as<float>();
  prefill.split_rows_capacity =
      static_cast<int>(std::min(w.gate_up.bytes() / (static_cast<size_t>(c.q_width()) * sizeof(float)),
                                w.activation.bytes() / (static_cast<size_t>(c.num_heads) * sizeof(float))));
  prefill.num_tokens = h.num_tokens;
  for (size_t i = 0; i < h.prefill_q_lens.size(); ++i)
    prefill.max_context_len = std::max(prefill.max_context_len, h.prefill_cached_lens[i] + h.prefill_q_lens[i]);

  QkNormRopeCacheWriteParams& rope = plan.rope;
  rope.qkv = w.qkv.as<bf16>();
  rope.positions = d.positions;
  rope.slots = d.slots;
  rope.inv_freq = inv_freq_.as<float>();
  rope.q_out = w.q.as<bf16>();
  rope.num_tokens = h.num_tokens;
  rope.num_heads = c.num_heads;
  rope.num_kv_heads = c.num_kv_heads;
  rope.head_dim = c.head_dim;
  rope.block_size = kv.block_size();
  rope.eps = static_cast<float>(c.rms_norm_eps);
  plan.rope_in_decode = prefill.num_prefill == 0 && decode.num_decode == h.num_tokens;
  return plan;
}

void Attention::run(const AttentionPlan& plan, const StepPlan& step, const KvLayerView& cache, const bf16* q_norm,
                    const bf16* k_norm, const KernelStream& stream) const {
  QkNormRopeCacheWriteParams rope = plan.rope;
  rope.q_norm = q_norm;
  rope.k_norm = k_norm;
  cache.bind(rope);
  DecodeAttentionParams decode = plan.decode;
  cache.bind(decode);
  if (plan.rope_in_decode) {
    decode.fuse_rope = true;
    decode.rope = rope;
  } else {
    launch_qk_norm_rope_cache_write(rope, stream);
  }
  launch_decode_attention(decode, plan.decode_plan, stream);
  if (decode.num_decode > 0 && stream.roles != nullptr)
    stream.roles->mark_last_launch(stream.stream, plan.decode_plan.kernel == DecodeAttentionKernel::kRegisters
                                                      ? GraphNodeRole::kRegisterDecodeAttention
                                                      : GraphNodeRole::kDecodeAttention);
  if (cache.dtype == KvCacheDtype::kFp8E4m3) {
    if (step.gather != nullptr) run_fp8_prefill(plan.prefill, step, cache, stream);
  } else {
    PrefillAttentionParams prefill = plan.prefill;
    cache.bind(prefill);
    launch_prefill_attention(prefill, stream);
  }
}

void Attention::run_fp8_prefill(const PrefillAttentionParams& prefill, const StepPlan& step, const KvLayerView& cache,
                                const KernelStream& stream) const {
  const ModelConfig& c = config_;
  const KvGatherPlan& gather = *step.gather;
  const DeviceBatch& d = step.device;
  const size_t scratch_elements =
      static_cast<size_t>(gather_scratch_blocks_) * c.num_kv_heads * block_size_ * c.head_dim;
  KvDequantGatherParams copy;
  cache.bind(copy);
  copy.k_out = gather_scratch_.as<bf16>();
  copy.v_out = gather_scratch_.as<bf16>() + scratch_elements;
  copy.num_kv_heads = c.num_kv_heads;
  copy.block_size = block_size_;
  copy.head_dim = c.head_dim;
  PrefillAttentionParams group_attention = prefill;
  group_attention.k_cache = copy.k_out;
  group_attention.v_cache = copy.v_out;
  group_attention.block_tables = d.gather_tables;
  group_attention.block_table_stride = gather.table_stride;
  group_attention.pool_blocks = gather_scratch_blocks_;
  for (const KvGatherGroup& group : gather.groups) {
    copy.src_blocks = d.gather_src_blocks + group.block_begin;
    copy.valid_tokens = d.gather_valid_tokens + group.block_begin;
    copy.num_blocks = group.num_blocks;
    launch_kv_dequant_gather(copy, stream);
    group_attention.table_rows = d.gather_table_rows + group.first;
    group_attention.q_starts = d.prefill_q_starts + group.first;
    group_attention.q_lens = d.prefill_q_lens + group.first;
    group_attention.cached_lens = d.prefill_cached_lens + group.first;
    group_attention.num_prefill = group.last - group.first;
    launch_prefill_attention(group_attention, stream);
  }
}

}  // namespace qinfer::cuda
