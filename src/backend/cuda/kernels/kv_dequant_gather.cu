#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBytesPerVector = 16;  // one 16-byte load of fp8 -> 16 bf16 -> two 16-byte stores
constexpr int kMaxGridY = 65535;

// 16 e4m3 bytes times `scale`, rounded to bf16: e4m3 -> f16 is exact (hardware pair conversion on sm_89+), so the
// product equals the host's fp8_e4m3_to_float(q) * scale.
__device__ __forceinline__ void dequantize16(uint4 packed, float scale, uint4 (&out)[2]) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&packed);
  auto* bf16_pairs = reinterpret_cast<__nv_bfloat162*>(out);
#pragma unroll
  for (int i = 0; i < kBytesPerVector / 2; ++i) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3)));
    bf16_pairs[i] = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  }
}

// grid.x covers the 16-byte vectors of one scratch block, grid.y strides over scratch blocks; each thread converts the
// same vector of K and of V, so two independent loads are in flight.
__global__ void __launch_bounds__(kThreads) kv_dequant_gather_kernel(KvDequantGatherParams p) {
  allow_dependents();
  wait_for_producer();
  const int block_elements = p.num_kv_heads * p.block_size * p.head_dim;
  const int element = (blockIdx.x * kThreads + threadIdx.x) * kBytesPerVector;
  if (element >= block_elements) return;
  const int token_row = element / p.head_dim;  // head * block_size + token
  const int token = token_row % p.block_size;
  for (int block = blockIdx.y; block < p.num_blocks; block += gridDim.y) {
    const int64_t out_offset = static_cast<int64_t>(block) * block_elements + element;
    const int64_t src = __ldg(p.src_blocks + block);  // issued with the next load, not after it
    const int valid = __ldg(p.valid_tokens + block);
    uint4 k_out[2] = {}, v_out[2] = {};
    if (token < valid) {
      const int64_t in_offset = src * block_elements + element;
      const uint4 k = load_streaming(p.k_cache + in_offset), v = load_streaming(p.v_cache + in_offset);
      const int64_t scale_index = src * p.num_kv_heads * p.block_size + token_row;
      dequantize16(k, __ldg(p.k_scales + scale_index), k_out);
      dequantize16(v, __ldg(p.v_scales + scale_index), v_out);
    }
    auto* k_dst = reinterpret_cast<uint4*>(p.k_out + out_offset);
    auto* v_dst = reinterpret_cast<uint4*>(p.v_out + out_offset);
    k_dst[0] = k_out[0];
    k_dst[1] = k_out[1];
    v_dst[0] = v_out[0];
    v_dst[1] = v_out[1];
  }
}

}  // namespace

void launch_kv_dequant_gather(const KvDequantGatherParams& params, const KernelStream& stream) {
  QINFER_CHECK(params.head_dim > 0 && params.head_dim % kBytesPerVector == 0, "head_dim must be a multiple of 16");
  QINFER_CHECK(params.num_kv_heads > 0 && params.block_size > 0 && params.num_blocks >= 0);
  if (params.num_blocks == 0) return;
  const int vectors_per_block = params.num_kv_heads * params.block_size * params.head_dim / kBytesPerVector;
  const dim3 grid((vectors_per_block + kThreads - 1) / kThreads, std::min(params.num_blocks, kMaxGridY));
  launch_dependent(kv_dequant_gather_kernel, grid, kThreads, 0, stream, params);
}

}  // namespace qinfer::cuda
