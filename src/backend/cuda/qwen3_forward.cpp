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
  launch_embedding({step.device.token_ids, weights_.embed, w.residual.as<float>(), tokens, c.hidden_size}, stream);

  const AttentionPlan attention = attention_.plan(step, kv_, w, stream.device);
  const LinearRoute route = route_linears(attention.decode.num_decode, attention.decode_plan.kernel);
  // residual += delta (none before the first layer), normed = RMSNorm(residual) * weight
  FusedAddRmsNormParams norm;
  norm.residual = w.residual.as<float>();
  norm.out = w.normed.as<bf16>();
  norm.num_rows = tokens;
  norm.hidden = c.hidden_size;
  norm.eps = static_cast<float>(c.rms_norm_eps);
  const auto add_and_norm = [&](const bf16* delta, const bf16* weight) {
    norm.delta = delta;
    norm.weight = weight;
    launch_fused_add_rmsnorm(norm, stream);
  };

  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayerWeights& lw = weights_.layers[static_cast<size_t>(l)];
    add_and_norm(l == 0 ? nullptr : w.delta.as<bf16>(), lw.input_norm);
    linears_.multiply(lw.qkv, w.normed.as<bf16>(), tokens, w.qkv.data(), false, route, stream);
    attention_.run(attention, step, kv_.layer(l), lw.q_norm, lw.k_norm, stream);
    linears_.multiply(lw.o_proj, w.attention.as<bf16>(), tokens, w.delta.data(), false, route, stream);
    add_and_norm(w.delta.as<bf16>(), lw.post_attn_norm);
    linears_.multiply_swiglu(lw.gate_up, w.normed.as<bf16>(), tokens, w.gate_up.as<bf16>(), w.activation.as<bf16>(),
                             route, stream);
    linears_.multiply(lw.down, w.activation.as<bf16>(), tokens, w.delta.data(), false, route, stream);
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
  final_norm.delta = w.delta.as<bf16>();
  final_norm.weight = weights_.final_norm;
  final_norm.out = w.final_normed.as<bf16>();
  final_norm.row_index = step.device.sample_rows + first;
  final_norm.write_residual = false;
  final_norm.num_rows = count;
  final_norm.hidden = c.hidden_size;
  final_norm.eps = static_cast<float>(c.rms_norm_eps);
  launch_fused_add_rmsnorm(final_norm, stream);
  linears_.multiply(weights_.lm_head, w.final_normed.as<bf16>(), count, w.logits.data(), true, route, stream);
}

}  // namespace qinfer::cuda
