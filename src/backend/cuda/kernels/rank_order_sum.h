// The same-device communicator's reduction (same_device_communicator.h): out = the sum of the ranks' buffers, added in
// rank order 0, 1, ..., N-1 in fp32 for every element (bf16 buffers are accumulated in fp32 and rounded once), so
// that every rank that runs it gets the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backend/parallel/communicator.h"

namespace qinfer::cuda {

inline constexpr int kMaxSameDeviceRanks = 8;

struct RankOrderSumParams {
  const void* inputs[kMaxSameDeviceRanks] = {};  // [num_inputs] buffers of [count] elements, in rank order
  void* out = nullptr;                           // [count]; must not overlap an input
  size_t count = 0;
  int num_inputs = 0;
  CommDtype dtype = CommDtype::kF32;
};

void launch_rank_order_sum(const RankOrderSumParams& params, cudaStream_t stream);

}  // namespace qinfer::cuda
