// The CPU reference backend: the exact Qwen3 math of transformers' modeling_qwen3 in fp32 over a paged fp32 KV
// cache. It defines what the CUDA backend must compute and runs the test suite where no GPU exists.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "util/thread_pool.h"

namespace qinfer {

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override { return kv_shape_; }
  int max_model_len() const override { return max_model_len_; }
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

 private:
  // Per-layer K or V pool: [num_blocks, block_size, num_kv_heads, head_dim].
  struct KvPool {
    std::unique_ptr<float[]> data;
    float* slot(int64_t block, int offset, int block_size, int kv_width) {
      return data.get() + (block * block_size + offset) * kv_width;
    }
  };

  void attention_layer(const Batch& batch, int layer, const std::vector<int64_t>& token_positions, const float* q,
                       float* out);
  void write_kv(const Batch& batch, int layer, const float* k, const float* v);

  std::shared_ptr<const LoadedModel> model_;
  ThreadPool pool_;
  int max_model_len_ = 0;
  KvCacheShape kv_shape_;
  std::vector<KvPool> k_cache_;  // [num_layers]
  std::vector<KvPool> v_cache_;  // [num_layers]
  std::vector<float> inv_freq_;  // [head_dim / 2]
};

}  // namespace qinfer
