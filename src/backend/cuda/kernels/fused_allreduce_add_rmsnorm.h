// One-shot all-reduce fused with the residual add and RMSNorm, for tensor-parallel ranks at decode sizes
// (docs/TENSOR_PARALLEL.md): every rank's kernel reads every rank's fp32 partial rows directly (peer pointers: other
// GPUs over NVLink, or the same device), adds them in rank order, adds the sum to its residual rows and writes the
// normalised bf16 rows: what all-reducing the partials in place and then fused_add_rmsnorm compute, bit for bit, in
// one launch and without the host. The handshake is a flag per (rank, row) in device memory: a rank's block of row b
// publishes its call count for b (its partial row is complete: the kernel that wrote it came before on the stream)
// and waits until every peer's flag reaches it. Capturable in CUDA graphs (no host work), as long as every rank
// launches the same calls: the counts advance in step.
//
// A rank overwrites a partial buffer only two calls later (o_proj and down alternate between two buffers), by which
// time every peer has passed the next call's handshake, so it has finished reading it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/rank_order_sum.h"

namespace qinfer::cuda {

inline constexpr int kOneShotAllReduceMaxRows = 8;  // decode sizes; more rows take NCCL's (or the same-device) ring

struct FusedAllReduceAddRmsNormParams {
  const float* partials[kMaxSameDeviceRanks] = {};  // [num_ranks] of [num_rows, hidden] fp32, every rank's, in order
  uint32_t* arrivals[kMaxSameDeviceRanks] = {};     // [num_ranks] of [kOneShotAllReduceMaxRows]: each rank's flags
  uint32_t* calls = nullptr;  // [kOneShotAllReduceMaxRows]: this rank's call count per row (its own)
  int rank = 0;
  int num_ranks = 1;
  float* residual = nullptr;              // [num_rows, hidden] this rank's residual stream, += the sum
  const __nv_bfloat16* weight = nullptr;  // [hidden]
  __nv_bfloat16* out = nullptr;           // [num_rows, hidden]
  int num_rows = 0;                       // at most kOneShotAllReduceMaxRows
  int hidden = 0;                         // multiple of 8, at most 8192
  float eps = 1e-6f;
};

void launch_fused_allreduce_add_rmsnorm(const FusedAllReduceAddRmsNormParams& params, const KernelStream& stream);

}  // namespace qinfer::cuda
