// The CPU reference backend: the exact Qwen3 math of transformers' modeling_qwen3 in fp32 over a paged fp32 KV
// cache (or, with KvCacheDtype::kFp8E4m3, the fp8 cache of the CUDA backend, dequantised when read). It defines what
// the CUDA backend must compute and runs the test suite where no GPU exists.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_kv_cache.h"
#include "util/thread_pool.h"

namespace qinfer {

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);

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

  std::shared_ptr<const LoadedModel> model_;
  ThreadPool pool_;
  int max_model_len_ = 0;
  KvCacheShape kv_shape_;
  MemoryPlan memory_plan_;
  std::unique_ptr<CpuKvCache> kv_cache_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
};

}  // namespace qinfer
