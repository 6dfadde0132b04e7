// Embedding gather into the fp32 residual stream. A tensor-parallel rank's table holds the vocabulary rows
// [table_begin, table_begin + table_rows): tokens outside them get zero rows, so that the sum over ranks is the
// embedding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

struct EmbeddingParams {
  const int32_t* token_ids = nullptr;    // [num_tokens]
  const __nv_bfloat16* table = nullptr;  // [table_rows, hidden]
  float* residual = nullptr;             // [num_tokens, hidden]
  int num_tokens = 0;
  int hidden = 0;           // multiple of 8
  int64_t table_begin = 0;  // token id of the table's first row
  int64_t table_rows = 0;   // 0: the whole vocabulary (every token id has its row)
};

void launch_embedding(const EmbeddingParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
