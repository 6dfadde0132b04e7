// The Qwen3 dense forward over one planned step, as a layer loop: embedding, then per layer input RMSNorm → qkv →
// attention → o_proj → residual + post-attention RMSNorm → gate/up + SwiGLU → down, then the final RMSNorm and
// lm_head at the sampled rows. A tensor-parallel rank adds its collectives (tensor_parallel_rank.h). The kernels'
// params plumbing lives in the pieces it calls (LinearLayers, Attention, KvPool); this file is the model's structure.
#pragma once

#include "backend/cuda/attention.h"
#include "backend/cuda/gpu_weights.h"
#include "backend/cuda/kv_pool.h"
#include "backend/cuda/linear_layer.h"
#include "backend/cuda/step_plan.h"
#include "backend/cuda/tensor_parallel_rank.h"
#include "backend/cuda/workspace.h"
#include "model/config.h"

namespace qinfer::cuda {

class Qwen3Forward {
 public:
  // References stay owned by the backend and must outlive this object. With `rank` (a tensor-parallel rank: the
  // weights are its shard), the forward makes the rank's collectives, so every rank of the group must enqueue the
  // same steps.
  Qwen3Forward(const ModelConfig& config, const GpuWeights& weights, const Workspace& workspace, LinearLayers& linears,
               const Attention& attention, const KvPool& kv, RankCollectives* rank = nullptr)
      : config_(config),
        weights_(weights),
        workspace_(workspace),
        linears_(linears),
        attention_(attention),
        kv_(kv),
        rank_(rank) {}

  // Enqueues the model over `step` and leaves the fp32 logits of its first sampled rows in workspace.logits
  // [min(num_sampled, max_logit_rows), vocab]; writes K/V of every token into the cache. Only enqueues work on the
  // stream (capturable).
  void enqueue(const StepPlan& step, const KernelStream& stream);

  // After enqueue() (and the use of the logits it left): the logits of sampled rows [first, first + count) of the
  // same step into workspace.logits [count, vocab], count <= max_logit_rows. For steps that sample more rows than the
  // logits buffer holds.
  void enqueue_logits(const StepPlan& step, int first, int count, const KernelStream& stream);

 private:
  // The final RMSNorm and lm_head of sampled rows [first, first + count), from the residual stream and the last
  // layer's delta.
  void enqueue_logits(const StepPlan& step, int first, int count, const LinearRoute& route, const KernelStream& stream);
  // o_proj or down: delta = x · Wᵀ over `rows` (a rank: its partial sum, all-reduced). Returns where the delta is,
  // for the next fused_add_rmsnorm.
  struct Delta {
    const __nv_bfloat16* bf16 = nullptr;
    const float* f32 = nullptr;
  };
  Delta multiply_into_delta(const LinearWeight& weight, const __nv_bfloat16* x, int rows, const LinearRoute& route,
                            const KernelStream& stream);
  Delta last_delta() const;  // where multiply_into_delta() leaves the delta

  const ModelConfig& config_;
  const GpuWeights& weights_;
  const Workspace& workspace_;
  LinearLayers& linears_;
  const Attention& attention_;
  const KvPool& kv_;
  RankCollectives* rank_;
};

}  // namespace qinfer::cuda
