#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/embedding.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

__global__ void embedding_kernel(EmbeddingParams p) {
  allow_dependents();
  wait_for_producer();
  const int token = blockIdx.x;
  const int64_t table_row = p.token_ids[token] - p.table_begin;
  float* out = p.residual + static_cast<int64_t>(token) * p.hidden;
  if (p.table_rows > 0 && (table_row < 0 || table_row >= p.table_rows)) {  // another rank's token
    for (int i = threadIdx.x * 4; i < p.hidden; i += blockDim.x * 4)
      *reinterpret_cast<float4*>(out + i) = make_float4(0, 0, 0, 0);
    return;
  }
  const __nv_bfloat16* row = p.table + table_row * p.hidden;
  for (int i = threadIdx.x * 8; i < p.hidden; i += blockDim.x * 8) {
    Bf16x8 v;
    v.raw = *reinterpret_cast<const uint4*>(row + i);
    float f[8];
    bf16x8_to_float(v, f);
    reinterpret_cast<float4*>(out + i)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(out + i)[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

}  // namespace

void launch_embedding(const EmbeddingParams& params, const KernelStream& stream) {
  if (params.num_tokens == 0) return;
  launch_dependent(embedding_kernel, params.num_tokens, 128, 0, stream, params);
}

}  // namespace qinfer::cuda
