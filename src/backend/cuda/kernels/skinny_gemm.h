// Batched-decode linear layer on Hopper: y[m, n] = sum_k x[m, k] * weight[n, k] for 3..128 rows of x. The weight
// is cut into units of 128 rows x 64 k; one persistent block per SM streams an equal, contiguous run of units (tile
// by tile, k inside a tile: "stream-K") once through a ring of bulk-copy stages, with the rows of x as the wgmma M
// dimension (one consumer warpgroup per 64 rows). A tile shared by several blocks is finished by the last of them to
// arrive (arrival counters), adding the partial sums in block order, so the result does not depend on arrival order.
// Launched with programmatic dependent launch: the first weight stages are requested before waiting for the producer
// of x. Needs an sm_90a build on compute capability 9.0 (skinny_gemm_available()); elsewhere the backend uses cuBLASLt.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace qinfer::cuda {

constexpr int kSkinnyGemmMaxRows = 128;

struct SkinnyGemmParams {
  const __nv_bfloat16* x = nullptr;       // [num_rows, k]
  const __nv_bfloat16* weight = nullptr;  // [n, k]
  void* y = nullptr;                      // [num_rows, n], bf16 or fp32 (y_fp32)
  bool y_fp32 = false;
  int num_rows = 0;  // 1..kSkinnyGemmMaxRows
  int n = 0;
  int k = 0;  // multiple of 64; x and weight 16-byte aligned
  // weight = [gate; up] ([n/2 + n/2, k]): y = silu(x·gateᵀ) * (x·upᵀ), [num_rows, n/2] bf16, rounded as HF does.
  bool swiglu = false;
  // Scratch for tiles shared by several blocks (skinny_gemm_partials_bytes / skinny_gemm_max_counters); counters zero
  // before the first launch, and every launch leaves them at zero.
  float* split_partials = nullptr;
  uint32_t* split_counters = nullptr;
  int blocks = 0;  // persistent blocks, at most one per SM; 0: one per SM
};

// True on a device this build has the kernel for.
bool skinny_gemm_available();

// Scratch sizes on a device with `num_sms` multiprocessors.
size_t skinny_gemm_partials_bytes(int num_sms);
int skinny_gemm_max_counters(int num_sms);

void launch_skinny_gemm(const SkinnyGemmParams& params, cudaStream_t stream);

}  // namespace qinfer::cuda
