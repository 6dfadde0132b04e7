#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/swiglu.h"

namespace qinfer::cuda {

namespace {

__global__ void swiglu_kernel(SwigluParams p) {
  allow_dependents();
  wait_for_producer();
  const int vectors_per_row = p.intermediate / 8;
  const int64_t vector = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector >= static_cast<int64_t>(p.num_tokens) * vectors_per_row) return;
  const int64_t token = vector / vectors_per_row;
  const int column = static_cast<int>(vector % vectors_per_row) * 8;
  const __nv_bfloat16* gate = p.gate_up + token * 2 * p.intermediate + column;
  Bf16x8 g, u;
  g.raw = *reinterpret_cast<const uint4*>(gate);
  u.raw = *reinterpret_cast<const uint4*>(gate + p.intermediate);
  float gf[8], uf[8], y[8];
  bf16x8_to_float(g, gf);
  bf16x8_to_float(u, uf);
#pragma unroll
  for (int j = 0; j < 8; ++j) y[j] = swiglu(gf[j], uf[j]);
  *reinterpret_cast<uint4*>(p.out + token * p.intermediate + column) = float_to_bf16x8(y).raw;
}

}  // namespace

void launch_swiglu(const SwigluParams& params, const KernelStream& stream) {
  QINFER_CHECK(params.intermediate % 8 == 0);
  const int64_t vectors = static_cast<int64_t>(params.num_tokens) * (params.intermediate / 8);
  if (vectors == 0) return;
  launch_dependent(swiglu_kernel, static_cast<unsigned>((vectors + 255) / 256), 256, 0, stream, params);
}

}  // namespace qinfer::cuda
