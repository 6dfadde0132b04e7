#include "backend/cuda/qwen3_forward.h"

#include <algorithm>

#include "backend/cuda/kernels/embedding.h"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "util/error.h"

namespace qinfer::cuda {

using bf16 = __nv_bfloat16;

void Qwen3Forward::enqueue(const StepPlan& step, const KernelStream& stream) {
  const ModelConfig& c = config_;
  const Workspace& w = workspace_;
  const int tokens = step.host.num_tokens;
  EmbeddingParams embedding{step.device.token_ids, weights_.embed, w.residual.as<float>(), tokens, c.hidden_size};
  if (rank_) {  // the rank's vocabulary rows, zero for the other ranks' tokens: their sum is the embedding
    embedding.table_begin = rank_->spec().vocab_begin();
    embedding.table_rows = weights_.vocab_rows;
  }
  launch_embedding(embedding, stream);
  if (rank_) rank_->all_reduce_rows(w.residual.as<float>(), tokens, stream);

  const AttentionPlan attention = attention_.plan(step, kv_, w, stream.device);
  const LinearRoute route = route_linears(attention.decode.num_decode, attention.decode_plan.kernel);
  // residual += delta (none before the first layer), normed = RMSNorm(residual) * weight
  FusedAddRmsNormParams norm;
  norm.residual = w.residual.as<float>();
  norm.out = w.normed.as<bf16>();
  norm.num_rows = tokens;
  norm.hidden = c.hidden_size;
  norm.eps = static_cast<float>(c.rms_norm_eps);
  const auto add_and_norm = [&](const Delta& delta, const bf16* weight) {
    norm.delta = delta.bf16;
    norm.delta_f32 = delta.f32;
    norm.weight = weight;
    launch_fused_add_rmsnorm(norm, stream);
  };

  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayerWeights& lw = weights_.layers[static_cast<size_t>(l)];
    add_and_norm(l == 0 ? Delta{} : last_delta(), lw.input_norm);
    linears_.multiply(lw.qkv, w.normed.as<bf16>(), tokens, w.qkv.data(), false, route, stream);
    attention_.run(attention, step, kv_.layer(l), lw.q_norm, lw.k_norm, stream);
    add_and_norm(multiply_into_delta(lw.o_proj, w.attention.as<bf16>(), tokens, route, stream), lw.post_attn_norm);
    linears_.multiply_swiglu(lw.gate_up, w.normed.as<bf16>(), tokens, w.gate_up.as<bf16>(), w.activation.as<bf16>(),
                             route, stream);
    multiply_into_delta(lw.down, w.activation.as<bf16>(), tokens, route, stream);
  }

  // The final norm and lm_head only at the sampled rows.
  const int sampled = static_cast<int>(step.host.sample_rows.size());
  enqueue_logits(step, 0, std::min(sampled, w.max_logit_rows), route, stream);
}

void Qwen3Forward::enqueue_logits(const StepPlan& step, int first, int count, const KernelStream& stream) {
  // Only steps of more than max_logit_rows sampled rows get here; their later chunks take the GEMMs (no GEMV route)
  // whatever the chunk's size.
  enqueue_logits(step, first, count, LinearRoute{}, stream);
}

void Qwen3Forward::enqueue_logits(const StepPlan& step, int first, int count, const LinearRoute& route,
                                  const KernelStream& stream) {
  const ModelConfig& c = config_;
  const Workspace& w = workspace_;
  QINFER_CHECK(first >= 0 && count <= w.max_logit_rows &&
               first + count <= static_cast<int>(step.host.sample_rows.size()));
  FusedAddRmsNormParams final_norm;
  final_norm.residual = w.residual.as<float>();
  const Delta delta = last_delta();
  final_norm.delta = delta.bf16;
  final_norm.delta_f32 = delta.f32;
  final_norm.weight = weights_.final_norm;
  final_norm.out = w.final_normed.as<bf16>();
  final_norm.row_index = step.device.sample_rows + first;
  final_norm.write_residual = false;
  final_norm.num_rows = count;
  final_norm.hidden = c.hidden_size;
  final_norm.eps = static_cast<float>(c.rms_norm_eps);
  launch_fused_add_rmsnorm(final_norm, stream);
  if (!rank_) {
    linears_.multiply(weights_.lm_head, w.final_normed.as<bf16>(), count, w.logits.data(), true, route, stream);
    return;
  }
  linears_.multiply(weights_.lm_head, w.final_normed.as<bf16>(), count, rank_->logits_slice(), true, route, stream);
  rank_->gather_logits(w.logits.as<float>(), count, stream);
}

Qwen3Forward::Delta Qwen3Forward::last_delta() const {
  if (rank_) return {.f32 = rank_->partial_delta()};
  return {.bf16 = workspace_.delta.as<bf16>()};
}

Qwen3Forward::Delta Qwen3Forward::multiply_into_delta(const LinearWeight& weight, const bf16* x, int rows,
                                                      const LinearRoute& route, const KernelStream& stream) {
  if (!rank_) {
    linears_.multiply(weight, x, rows, workspace_.delta.data(), false, route, stream);
    return last_delta();
  }
  // The partial sum stays fp32 through the all-reduce, so that the sum over ranks adds no bf16 rounding.
  linears_.multiply(weight, x, rows, rank_->partial_delta(), true, route, stream);
  rank_->all_reduce_rows(rank_->partial_delta(), rows, stream);
  return last_delta();
}

}  // namespace qinfer::cuda
