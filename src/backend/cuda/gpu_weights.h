// The model's weights in device memory: norms and embeddings bf16, linears bf16 or packed quantized
// (quantized_weight_layout.h), with q/k/v fused into one [q+2kv, hidden] matrix and gate/up into one
// [2*intermediate, hidden] matrix so that each decode layer streams few, large weights.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/linear_layer.h"
#include "model/qwen3_weights.h"

namespace qinfer::cuda {

struct GpuLayerWeights {
  const __nv_bfloat16* input_norm = nullptr;      // [hidden]
  LinearWeight qkv;                               // [q_width + 2*kv_width, hidden]: q rows, then k, then v
  const __nv_bfloat16* q_norm = nullptr;          // [head_dim]
  const __nv_bfloat16* k_norm = nullptr;          // [head_dim]
  LinearWeight o_proj;                            // [hidden, q_width]
  const __nv_bfloat16* post_attn_norm = nullptr;  // [hidden]
  LinearWeight gate_up;                           // [2*intermediate, hidden]: gate rows, then up
  LinearWeight down;                              // [hidden, intermediate]
};

struct GpuWeights {
  DeviceBuffer storage;  // every tensor below points into it
  std::vector<GpuLayerWeights> layers;
  const __nv_bfloat16* embed = nullptr;       // [vocab_rows, hidden]
  const __nv_bfloat16* final_norm = nullptr;  // [hidden]
  LinearWeight lm_head;                       // [vocab_rows, hidden] bf16; the embedding's bytes when tied
  int64_t vocab_rows = 0;  // rows of embed and lm_head: the vocabulary, or a tensor-parallel rank's slice of it
  size_t bytes = 0;
  std::vector<QuantizedLinearShape> quantized_shapes;  // the distinct shapes of the quantized linears (none: bf16)
};

// Copies the model's weights to the device through pinned staging buffers (converting F32/F16 to bf16 on the way,
// repacking quantized linears on the host's cores), logging progress. Throws Error(kOutOfMemory) when they do not fit,
// Error(kUnsupported) for quantized layouts the kernels cannot run (pack_quantized_linear).
GpuWeights upload_weights(const LoadedModel& model, cudaStream_t stream);

}  // namespace qinfer::cuda
