// Embedding gather into the fp32 residual stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct EmbeddingParams {
  const int32_t* token_ids = nullptr;    // [num_tokens]
  const __nv_bfloat16* table = nullptr;  // [vocab, hidden]
  float* residual = nullptr;             // [num_tokens, hidden]
  int num_tokens = 0;
  int hidden = 0;  // multiple of 8
};

void launch_embedding(const EmbeddingParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
