// The merge of the wgmma prefill attention's key splits (prefill_attention.h, PrefillAttentionParams::kv_splits).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/kernels/prefill_attention.h"

namespace qinfer::cuda {

// Combines the kv_splits partial rows of every query row of the prefill sequences into params.out (bf16).
void launch_merge_prefill_attention_splits(const PrefillAttentionParams& params, cudaStream_t stream);

}  // namespace qinfer::cuda
