#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/block_table_scatter.h"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 128;

// grid (num_writes): one block per write, its threads striding over the write's columns.
__global__ void block_table_scatter_kernel(BlockTableScatterParams p) {
  const BlockTableWrite w = p.writes[blockIdx.x];
  int32_t* row = p.tables + w.row * p.stride + w.first_column;
  const int32_t* source = p.block_ids + w.source;
  for (int i = threadIdx.x; i < w.count; i += kThreads) row[i] = source[i];
}

}  // namespace

void launch_block_table_scatter(const BlockTableScatterParams& params, cudaStream_t stream) {
  if (params.num_writes == 0) return;
  block_table_scatter_kernel<<<params.num_writes, kThreads, 0, stream>>>(params);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda
