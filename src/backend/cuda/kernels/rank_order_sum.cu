#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/rank_order_sum.h"

namespace qinfer::cuda {

namespace {

template <typename T>
__device__ __forceinline__ float load_as_float(const void* buffer, size_t i) {
  if constexpr (std::is_same_v<T, float>)
    return static_cast<const float*>(buffer)[i];
  else
    return __bfloat162float(static_cast<const __nv_bfloat16*>(buffer)[i]);
}

template <typename T>
__global__ void rank_order_sum_kernel(RankOrderSumParams p) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    float sum = load_as_float<T>(p.inputs[0], i);
    for (int r = 1; r < p.num_inputs; ++r) sum += load_as_float<T>(p.inputs[r], i);
    if constexpr (std::is_same_v<T, float>)
      static_cast<float*>(p.out)[i] = sum;
    else
      static_cast<__nv_bfloat16*>(p.out)[i] = __float2bfloat16(sum);
  }
}

}  // namespace

void launch_rank_order_sum(const RankOrderSumParams& params, cudaStream_t stream) {
  QINFER_CHECK(params.num_inputs >= 1 && params.num_inputs <= kMaxSameDeviceRanks);
  if (params.count == 0) return;
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((params.count + kThreads - 1) / kThreads, 1024);
  if (params.dtype == CommDtype::kF32)
    rank_order_sum_kernel<float><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(params);
  else
    rank_order_sum_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(params);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda
