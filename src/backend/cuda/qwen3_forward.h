// The Qwen3 dense forward over one planned step, as a layer loop: embedding, then per layer input RMSNorm → qkv →
// attention → o_proj → residual + post-attention RMSNorm → gate/up + SwiGLU → down, then the final RMSNorm and
// lm_head at the sampled rows. The kernels' params plumbing lives in the pieces it calls (LinearLayers, Attention,
// KvPool); this file is the model's structure.
#pragma once

#include "backend/cuda/attention.h"
#include "backend/cuda/gpu_weights.h"
#include "backend/cuda/kv_pool.h"
#include "backend/cuda/linear_layer.h"
#include "backend/cuda/step_plan.h"
#include "backend/cuda/workspace.h"
#include "model/config.h"

namespace qinfer::cuda {

class Qwen3Forward {
 public:
  // References stay owned by the backend and must outlive this object.
  Qwen3Forward(const ModelConfig& config, const GpuWeights& weights, const Workspace& workspace, LinearLayers& linears,
               const Attention& attention, const KvPool& kv)
      : config_(config), weights_(weights), workspace_(workspace), linears_(linears), attention_(attention), kv_(kv) {}

  // Enqueues the model over `step` and leaves the fp32 logits of its sampled rows in workspace.logits
  // [num_sampled, vocab]; writes K/V of every token into the cache. Only enqueues work on the stream (capturable).
  void enqueue(const StepPlan& step, const KernelStream& stream);

 private:
  const ModelConfig& config_;
  const GpuWeights& weights_;
  const Workspace& workspace_;
  LinearLayers& linears_;
  const Attention& attention_;
  const KvPool& kv_;
};

}  // namespace qinfer::cuda
