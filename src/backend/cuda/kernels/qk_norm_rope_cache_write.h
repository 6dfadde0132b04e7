// Per head of the fused QKV projection: RMSNorm of q and k over head_dim (q_norm / k_norm), rotate-half RoPE at the
// token's position, then q goes to a packed buffer and k, v into the paged KV cache: bf16, or fp8 E4M3 with one fp32
// scale per (token, KV head) quantised as util/fp8.h's quantize_fp8_e4m3_vector does on the host (amax by a warp
// reduction, then the same two IEEE fp32 operations and __nv_cvt_float_to_fp8's round-to-nearest-even saturation), so
// both give identical bytes and scales from identical fp32 inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct QkNormRopeCacheWriteParams {
  const __nv_bfloat16* qkv = nullptr;     // [num_tokens, (num_heads + 2*num_kv_heads) * head_dim]: q | k | v
  const int32_t* positions = nullptr;     // [num_tokens]
  const int64_t* slots = nullptr;         // [num_tokens] block * block_size + offset in block
  const __nv_bfloat16* q_norm = nullptr;  // [head_dim]
  const __nv_bfloat16* k_norm = nullptr;  // [head_dim]
  const float* inv_freq = nullptr;        // [head_dim / 2] theta^(-2i/head_dim)
  __nv_bfloat16* q_out = nullptr;         // [num_tokens, num_heads, head_dim]
  __nv_bfloat16* k_cache = nullptr;       // [num_blocks, num_kv_heads, block_size, head_dim] (this layer)
  __nv_bfloat16* v_cache = nullptr;       // same layout as k_cache
  // The fp8 cache, used instead of k_cache / v_cache when k_fp8 is set.
  uint8_t* k_fp8 = nullptr;   // [num_blocks, num_kv_heads, block_size, head_dim] E4M3 (this layer)
  uint8_t* v_fp8 = nullptr;   // same layout
  float* k_scales = nullptr;  // [num_blocks, num_kv_heads, block_size]
  float* v_scales = nullptr;  // same layout
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int block_size = 0;
  float eps = 1e-6f;
};

void launch_qk_norm_rope_cache_write(const QkNormRopeCacheWriteParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
