// Dequantising gather for prefill attention over an fp8 KV cache: copies the listed blocks of one layer's fp8 K and V
// cache into a bf16 scratch pool, value = float(e4m3 byte) * scale of its (block, head, token), rounded to bf16.
// Scratch block s receives cache block src_blocks[s]; token slots at or past valid_tokens[s] are written as zeros, so
// the attention kernel's masked tail reads finite values.
//
// One launch covers one group of a KvGatherPlan (kv_gather_plan.h): pass src_blocks / valid_tokens offset by the
// group's block_begin and num_blocks = its num_blocks. K and V are done in the same launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct KvDequantGatherParams {
  const uint8_t* k_cache = nullptr;       // [pool_blocks, num_kv_heads, block_size, head_dim] fp8 e4m3 (this layer)
  const uint8_t* v_cache = nullptr;       // same layout
  const float* k_scales = nullptr;        // [pool_blocks, num_kv_heads, block_size]
  const float* v_scales = nullptr;        // same layout
  const int32_t* src_blocks = nullptr;    // [num_blocks] cache block per scratch block
  const int32_t* valid_tokens = nullptr;  // [num_blocks] token slots to dequantise; the rest become zeros
  __nv_bfloat16* k_out = nullptr;         // [>= num_blocks, num_kv_heads, block_size, head_dim] scratch
  __nv_bfloat16* v_out = nullptr;         // same layout
  int num_blocks = 0;
  int num_kv_heads = 0;
  int block_size = 0;
  int head_dim = 0;  // a multiple of 16 (64 or 128 for Qwen3)
};

// Enqueues the gather on `stream` with programmatic dependent launch (kernels/pdl.cuh). num_blocks 0 is a no-op.
void launch_kv_dequant_gather(const KvDequantGatherParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
