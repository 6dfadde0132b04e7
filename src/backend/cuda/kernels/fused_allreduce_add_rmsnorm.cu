#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/fused_allreduce_add_rmsnorm.h"
#include "backend/cuda/kernels/rmsnorm_row.cuh"

namespace qinfer::cuda {

namespace {

// The thread layout and arithmetic of fused_add_rmsnorm.cu (rmsnorm_row.cuh), so that the rows equal the unfused
// path's bits.
constexpr int kThreads = kRmsNormThreads;
constexpr int kMaxVectorsPerThread = kRmsNormMaxVectorsPerThread;
// A peer that has not arrived after this many polls (about a second) stops the kernel with an error (the rank's
// context fails, the step reports it) instead of hanging the GPU.
constexpr uint32_t kMaxPolls = 1u << 23;

__device__ __forceinline__ void publish_arrival(uint32_t* flag, uint32_t value) {
  __threadfence_system();
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ uint32_t load_arrival(const uint32_t* flag) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

// One block per row.
__global__ void __launch_bounds__(kThreads) fused_allreduce_add_rmsnorm_kernel(FusedAllReduceAddRmsNormParams p) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (threadIdx.x == 0) {
    const uint32_t call = p.calls[row] + 1;
    p.calls[row] = call;
    publish_arrival(p.arrivals[p.rank] + row, call);
    for (int q = 0; q < p.num_ranks; ++q) {
      if (q == p.rank) continue;
      uint32_t polls = 0;
      while (load_arrival(p.arrivals[q] + row) < call) {
        if (++polls == kMaxPolls) {
          printf("fused_allreduce_add_rmsnorm: rank %d, row %d: rank %d did not arrive\n", p.rank, row, q);
          __trap();
        }
        __nanosleep(100);
      }
    }
  }
  __syncthreads();
  float* residual = p.residual + static_cast<int64_t>(row) * p.hidden;
  float values[kMaxVectorsPerThread][8];
  float sum_squares = 0;
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int i = (threadIdx.x + v * kThreads) * 8;
    if (i < p.hidden) {
      float delta[8];
      for (int q = 0; q < p.num_ranks; ++q) {
        // L2 only: a peer's rows of the previous call may sit in this SM's L1.
        const float* partial = p.partials[q] + static_cast<int64_t>(row) * p.hidden + i;
        const float4 a = __ldcg(reinterpret_cast<const float4*>(partial));
        const float4 b = __ldcg(reinterpret_cast<const float4*>(partial) + 1);
        const float part[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) delta[j] = q == 0 ? part[j] : delta[j] + part[j];
      }
      const float4 a = reinterpret_cast<const float4*>(residual + i)[0];
      const float4 b = reinterpret_cast<const float4*>(residual + i)[1];
      float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] += delta[j];
      reinterpret_cast<float4*>(residual + i)[0] = make_float4(x[0], x[1], x[2], x[3]);
      reinterpret_cast<float4*>(residual + i)[1] = make_float4(x[4], x[5], x[6], x[7]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        values[v][j] = x[j];
        sum_squares += x[j] * x[j];
      }
    }
  }
  uint4 weight[kMaxVectorsPerThread];
#pragma unroll
  for (int v = 0; v < kMaxVectorsPerThread; ++v) {
    const int i = rmsnorm_vector_index(v);
    if (i < p.hidden) weight[v] = *reinterpret_cast<const uint4*>(p.weight + i);
  }
  write_rmsnorm_row(values, sum_squares, weight, p.out + static_cast<int64_t>(row) * p.hidden, p.hidden, p.eps,
                    scratch);
}

}  // namespace

void launch_fused_allreduce_add_rmsnorm(const FusedAllReduceAddRmsNormParams& params, const KernelStream& stream) {
  QINFER_CHECK(params.hidden % 8 == 0 && params.hidden <= kThreads * 8 * kMaxVectorsPerThread);
  QINFER_CHECK(params.num_rows <= kOneShotAllReduceMaxRows && params.num_ranks >= 1 &&
               params.num_ranks <= kMaxSameDeviceRanks && params.rank >= 0 && params.rank < params.num_ranks);
  if (params.num_rows == 0) return;
  // A plain launch: the partial rows must be complete before the flag says so.
  fused_allreduce_add_rmsnorm_kernel<<<params.num_rows, kThreads, 0, stream.stream>>>(params);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda
