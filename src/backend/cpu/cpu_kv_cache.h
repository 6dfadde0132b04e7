// The CPU backend's paged KV cache, one pool per layer for K and one for V, in one of two storages:
//  - fp32 (KvCacheDtype::kBf16, the reference): [num_blocks, block_size, num_kv_heads, head_dim] fp32;
//  - fp8 (KvCacheDtype::kFp8E4m3): [num_blocks, num_kv_heads, block_size, head_dim] E4M3 bytes and
//    [num_blocks, num_kv_heads, block_size] fp32 scales, quantised per (token, KV head) by quantize_fp8_e4m3_vector —
//    the format and layout of the CUDA backend's fp8 pool.
// Reads hand out fp32 vectors: a pointer into the pool (fp32) or the dequantised float(q) * scale (fp8).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace qinfer {

class CpuKvCache {
 public:
  enum class Part { kKey, kValue };

  // Storage stays uninitialised: pages are touched only when blocks are used.
  CpuKvCache(KvCacheDtype dtype, int num_layers, int64_t num_blocks, int block_size, int num_kv_heads, int head_dim);

  // Bytes one block takes over all layers, K and V.
  static int64_t block_bytes(KvCacheDtype dtype, int num_layers, int block_size, int num_kv_heads, int head_dim);

  // Stores one token's K or V, `vector` = [num_kv_heads, head_dim] fp32, at (block, offset in block).
  void write(int layer, Part part, int64_t block, int offset, const float* vector);

  // The stored vector of one KV head as fp32 [head_dim]: a pointer into the pool, or `buffer` (head_dim floats)
  // filled with the dequantised values.
  const float* read(int layer, Part part, int64_t block, int offset, int kv_head, float* buffer) const {
    if (dtype_ == KvCacheDtype::kBf16) return fp32_vector(layer, part, block, offset, kv_head);
    dequantize(layer, part, block, offset, kv_head, buffer);
    return buffer;
  }

  // For tests: what fp8 storage holds for one (token, KV head): head_dim E4M3 bytes and the scale.
  struct Fp8Vector {
    std::span<const uint8_t> bytes;
    float scale = 0;
  };
  Fp8Vector fp8_vector(int layer, Part part, int64_t block, int offset, int kv_head) const;
  // For tests: the fp32 storage's vector of one (token, KV head), [head_dim].
  const float* fp32_vector(int layer, Part part, int64_t block, int offset, int kv_head) const {
    const int64_t row = block * block_size_ + offset;
    return pools_[pool_index(layer, part)].fp32.get() + (row * num_kv_heads_ + kv_head) * head_dim_;
  }

 private:
  struct Pool {
    std::unique_ptr<float[]> fp32;     // fp32 storage
    std::unique_ptr<uint8_t[]> bytes;  // fp8 storage: E4M3 data
    std::unique_ptr<float[]> scales;   // fp8 storage: one scale per (block, KV head, offset)
  };
  size_t pool_index(int layer, Part part) const { return static_cast<size_t>(2 * layer + (part == Part::kValue)); }
  // Index of the (token, KV head) vector in fp8 storage, in vectors: [num_blocks, num_kv_heads, block_size].
  int64_t fp8_vector_index(int64_t block, int offset, int kv_head) const {
    return (block * num_kv_heads_ + kv_head) * block_size_ + offset;
  }
  void dequantize(int layer, Part part, int64_t block, int offset, int kv_head, float* out) const;

  KvCacheDtype dtype_;
  int block_size_, num_kv_heads_, head_dim_;
  std::vector<Pool> pools_;                // [num_layers * 2]: K and V of each layer
  std::array<float, 256> fp8_to_float_{};  // E4M3 code -> value
};

}  // namespace qinfer
