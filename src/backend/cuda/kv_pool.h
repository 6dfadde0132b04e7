// The paged KV cache on the device: sized from what the memory budget leaves, allocated once, and seen per layer
// through views that bind their own pointers into any kernel's params, so that this is the one place that knows
// whether the cache holds bf16 or fp8.
//
// Layout per layer, K then V: [pool_blocks, num_kv_heads, block_size, head_dim] (a block of one head is contiguous:
// 4 KB at bf16, block 16, head_dim 128); an fp8 cache adds fp32 scales [pool_blocks, num_kv_heads, block_size].
// pool_blocks = num_blocks + 1: the last block is the scratch block that padding rows of decode graphs write.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "model/config.h"

namespace qinfer::cuda {

// One layer's K and V: bf16 pools, or E4M3 bytes and their scales.
struct KvLayerView {
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  __nv_bfloat16* k = nullptr;  // bf16: [pool_blocks, num_kv_heads, block_size, head_dim]
  __nv_bfloat16* v = nullptr;
  uint8_t* k_fp8 = nullptr;  // fp8: [pool_blocks, num_kv_heads, block_size, head_dim] E4M3
  uint8_t* v_fp8 = nullptr;
  float* k_scales = nullptr;  // fp8: [pool_blocks, num_kv_heads, block_size]
  float* v_scales = nullptr;

  // The cache pointers of each kernel that reads or writes it, and the decode attention's kv_dtype (the other fields
  // stay as they are).
  void bind(QkNormRopeCacheWriteParams& params) const;
  void bind(DecodeAttentionParams& params) const;
  void bind(PrefillAttentionParams& params) const;  // bf16 caches only: fp8 prefill reads a dequantised scratch
  void bind(KvDequantGatherParams& params) const;   // fp8 caches only
};

// A named part of the device memory the backend took, for the memory plan and out-of-memory errors.
struct MemoryPart {
  std::string name;
  size_t bytes = 0;
};

struct KvPoolOptions {
  KvCacheDtype dtype = KvCacheDtype::kBf16;
  int block_size = 16;
  int max_model_len = 0;  // one sequence of this length must fit
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_bytes = 0;  // > 0: this many bytes instead of the utilisation budget
  // BackendOptions' draft fields: a draft's KV bytes per block of this pool and its other bytes, both taken from the
  // budget; and an exact block count (a draft's pool: its target's count), which ignores the budget.
  int64_t draft_kv_bytes_per_block = 0;
  int64_t draft_reserved_bytes = 0;
  int64_t num_blocks = 0;
};

class KvPool {
 public:
  // Takes what the budget leaves after the device memory already in use (`allocated` names what the backend took,
  // for the error message). Throws Error(kOutOfMemory) naming every part and the flag to change when one sequence of
  // max_model_len does not fit.
  KvPool(const ModelConfig& config, const KvPoolOptions& options, const std::vector<MemoryPart>& allocated);

  KvLayerView layer(int layer) const;
  KvCacheShape shape() const { return shape_; }
  KvCacheDtype dtype() const { return shape_.dtype; }
  bool fp8() const { return shape_.dtype == KvCacheDtype::kFp8E4m3; }
  int block_size() const { return shape_.block_size; }
  // Blocks the pools hold: the visible ones and the scratch block (the bound of the Hopper kernels' tensor maps).
  int64_t pool_blocks() const { return shape_.num_blocks + 1; }
  // The block past the visible pool, written by padding rows of decode graphs.
  int32_t scratch_block() const { return static_cast<int32_t>(shape_.num_blocks); }
  int64_t device_total_bytes() const { return device_total_bytes_; }
  // What the backend may use of the device: gpu_memory_utilization of it, or what was used plus kv_cache_bytes.
  int64_t budget_bytes() const { return budget_bytes_; }

 private:
  DeviceBuffer pool_;          // [num_layers][K|V][pool_blocks, num_kv_heads, block_size, head_dim] bf16 or E4M3
  DeviceBuffer scales_;        // fp8: [num_layers][K|V][pool_blocks, num_kv_heads, block_size] fp32
  size_t layer_elements_ = 0;  // elements of one layer's K (or V) pool
  size_t layer_vectors_ = 0;   // (token, KV head) vectors of one layer's K (or V) pool
  KvCacheShape shape_;
  int64_t device_total_bytes_ = 0;
  int64_t budget_bytes_ = 0;
};

// "1.25 GiB"
std::string format_gib(double bytes);

}  // namespace qinfer::cuda
