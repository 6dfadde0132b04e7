#include "backend/cpu/cpu_kv_cache.h"

#include <algorithm>

#include "util/fp8.h"

namespace qinfer {

CpuKvCache::CpuKvCache(KvCacheDtype dtype, int num_layers, int64_t num_blocks, int block_size, int num_kv_heads,
                       int head_dim)
    : dtype_(dtype), block_size_(block_size), num_kv_heads_(num_kv_heads), head_dim_(head_dim) {
  const size_t vectors = static_cast<size_t>(num_blocks) * block_size * num_kv_heads;
  const size_t elements = vectors * static_cast<size_t>(head_dim);
  for (int i = 0; i < 2 * num_layers; ++i) {
    Pool pool;
    if (dtype == KvCacheDtype::kFp8E4m3) {
      pool.bytes.reset(new uint8_t[elements]);
      pool.scales.reset(new float[vectors]);
    } else {
      pool.fp32.reset(new float[elements]);
    }
    pools_.push_back(std::move(pool));
  }
  for (int code = 0; code < 256; ++code)
    fp8_to_float_[static_cast<size_t>(code)] = fp8_e4m3_to_float(static_cast<uint8_t>(code));
}

int64_t CpuKvCache::block_bytes(KvCacheDtype dtype, int num_layers, int block_size, int num_kv_heads, int head_dim) {
  const int64_t vectors = int64_t{2} * num_layers * block_size * num_kv_heads;
  // fp8 as on the GPU; the fp32 reference stores 4 bytes per element where the GPU stores bf16.
  return dtype == KvCacheDtype::kFp8E4m3 ? vectors * kv_cache_vector_bytes(dtype, head_dim) : vectors * head_dim * 4;
}

void CpuKvCache::write(int layer, Part part, int64_t block, int offset, const float* vector) {
  Pool& pool = pools_[pool_index(layer, part)];
  if (dtype_ == KvCacheDtype::kBf16) {
    std::copy_n(vector, num_kv_heads_ * head_dim_,
                pool.fp32.get() + (block * block_size_ + offset) * num_kv_heads_ * static_cast<int64_t>(head_dim_));
    return;
  }
  for (int head = 0; head < num_kv_heads_; ++head) {
    const int64_t index = fp8_vector_index(block, offset, head);
    pool.scales[static_cast<size_t>(index)] = quantize_fp8_e4m3_vector(
        std::span<const float>(vector + static_cast<size_t>(head) * head_dim_, static_cast<size_t>(head_dim_)),
        pool.bytes.get() + index * head_dim_);
  }
}

CpuKvCache::Fp8Vector CpuKvCache::fp8_vector(int layer, Part part, int64_t block, int offset, int kv_head) const {
  const Pool& pool = pools_[pool_index(layer, part)];
  const int64_t index = fp8_vector_index(block, offset, kv_head);
  return {std::span<const uint8_t>(pool.bytes.get() + index * head_dim_, static_cast<size_t>(head_dim_)),
          pool.scales[static_cast<size_t>(index)]};
}

void CpuKvCache::dequantize(int layer, Part part, int64_t block, int offset, int kv_head, float* out) const {
  const Pool& pool = pools_[pool_index(layer, part)];
  const int64_t index = fp8_vector_index(block, offset, kv_head);
  const uint8_t* bytes = pool.bytes.get() + index * head_dim_;
  const float scale = pool.scales[static_cast<size_t>(index)];
  for (int i = 0; i < head_dim_; ++i) out[i] = fp8_to_float_[bytes[i]] * scale;
}

}  // namespace qinfer
