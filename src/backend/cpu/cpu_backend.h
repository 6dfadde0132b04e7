// The CPU reference backend: the exact Qwen3 math of transformers' modeling_qwen3 in fp32 over a paged fp32 KV
// cache (or, with KvCacheDtype::kFp8E4m3, the fp8 cache of the CUDA backend, dequantised when read). It defines what
// the CUDA backend must compute and runs the test suite where no GPU exists.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_kv_cache.h"
#include "backend/parallel/communicator.h"
#include "model/tensor_shard.h"
#include "util/thread_pool.h"

namespace qinfer {

// A CpuBackend as one rank of a tensor-parallel group (TensorParallelCpuBackend): its model is the rank's
// shard_weights, and `communicator` combines the ranks' partial results.
struct CpuTensorParallelRank {
  ShardSpec spec;
  Communicator* communicator = nullptr;  // the rank's, outlives the backend
};

class CpuBackend final : public Backend {
 public:
  // With `rank`, `model` is the rank's shard and forward_logits() makes the same collective calls on every rank
  // (from one thread per rank); the KV cache then holds the rank's KV heads only.
  CpuBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options,
             std::optional<CpuTensorParallelRank> rank = std::nullopt);

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override { return kv_shape_; }
  int max_model_len() const override { return max_model_len_; }
  MemoryPlan memory_plan() const override { return memory_plan_; }
  bool supports_multi_position_sampling() const override { return true; }
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

  // For tests: the cache as stored (fp32 or fp8 with scales).
  const CpuKvCache& stored_kv_cache() const { return *kv_cache_; }

 private:
  void attention_layer(const Batch& batch, int layer, const std::vector<int64_t>& token_positions, const float* q,
                       float* out);
  void write_kv(const Batch& batch, int layer, const float* k, const float* v);
  // x = [n, hidden]: the embedding rows of `token_ids` (on a rank: summed over the ranks' vocabulary slices).
  void embed(std::span<const int32_t> token_ids, float* x);
  // Sums a row-parallel layer's partial output [count] over the ranks, in place; nothing without ranks.
  void reduce_partial(std::vector<float>& partial);
  // logits = [num_sampled, vocab] of the final-normed rows `last` [num_sampled, hidden] (on a rank: every rank's
  // vocabulary slice gathered).
  std::vector<float> lm_head_logits(const std::vector<float>& last, int num_sampled);

  std::shared_ptr<const LoadedModel> model_;
  ThreadPool pool_;
  int max_model_len_ = 0;
  KvCacheShape kv_shape_;
  MemoryPlan memory_plan_;
  std::unique_ptr<CpuKvCache> kv_cache_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  std::optional<CpuTensorParallelRank> rank_;
};

}  // namespace qinfer
