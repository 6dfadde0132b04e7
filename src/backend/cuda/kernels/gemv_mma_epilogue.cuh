// The shared parts of the tensor-core GEMVs (bf16 and quantized weights): a block owns 16 weight rows (with SwiGLU 8
// gate rows and the matching 8 up rows) and every row of x in tiles of 8; its warps split k and hold mma.sync
// accumulators acc[tile][r] (mma_group below). At the end the warps' accumulators are added in warp order through
// shared memory, so the result does not depend on timing and a row of x gets the same bits whatever the other rows
// hold, then stored as y (or as the SwiGLU of gate and up).
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda {

inline constexpr int kGemvMmaRowsPerTile = 8;  // rows of x per mma.sync tile (its n dimension)

// The weight rows block `block` owns for the lane's quad row g: rows g and g + 8 of the block's 16 (A rows g, g + 8);
// with SwiGLU gate row g of the block's 8 and its up row. Rows past the end are clamped (their results are dropped).
struct GemvMmaRows {
  int lo;
  int hi;
};
__device__ __forceinline__ GemvMmaRows gemv_mma_rows(int block, int g, int n, bool swiglu) {
  if (swiglu) {
    const int half = n / 2, gate = min(block * 8 + g, half - 1);
    return {gate, half + gate};
  }
  return {min(block * 16 + g, n - 1), min(block * 16 + 8 + g, n - 1)};
}

// Accumulator register r of lane l: weight row l / 4 + 8 * (r / 2) of the block, x row 2 * (l % 4) + r % 2 of the
// tile. y is [num_rows, n] (or [num_rows, n / 2] with SwiGLU).
template <int kWarps, int kTiles, typename OutT>
__device__ __forceinline__ void store_gemv_mma_block(const float (&acc)[kTiles][4], void* y, int num_rows, int n,
                                                     bool swiglu) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // partial[warp][tile][register][lane]: lanes write consecutive words.
  __shared__ float partial[kWarps][kTiles][4][32];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
    for (int r = 0; r < 4; ++r) partial[warp][tile][r][lane] = acc[tile][r];
  __syncthreads();
  auto reduced = [&](int tile, int r, int l) {
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][tile][r][l];
    return sum;
  };
  if (swiglu) {
    const int half = n / 2, first_gate = blockIdx.x * 8;
    for (int index = threadIdx.x; index < kTiles * 2 * 32; index += kWarps * 32) {
      const int l = index % 32, c = index / 32 % 2, tile = index / 64;
      const int m = tile * kGemvMmaRowsPerTile + 2 * (l % 4) + c, j = first_gate + l / 4;
      if (m >= num_rows || j >= half) continue;
      const float gate = reduced(tile, c, l), up = reduced(tile, 2 + c, l);
      store_output(swiglu_of_sums(gate, up), static_cast<OutT*>(y) + static_cast<int64_t>(m) * half + j);
    }
    return;
  }
  for (int index = threadIdx.x; index < kTiles * 4 * 32; index += kWarps * 32) {
    const int l = index % 32, r = index / 32 % 4, tile = index / 128;
    const int m = tile * kGemvMmaRowsPerTile + 2 * (l % 4) + r % 2, row = blockIdx.x * 16 + l / 4 + 8 * (r / 2);
    if (m >= num_rows || row >= n) continue;
    store_output(reduced(tile, r, l), static_cast<OutT*>(y) + static_cast<int64_t>(m) * n + row);
  }
}

// acc += W[16 rows x 32 k] * x[32 k x 8 rows] for one 32-k group of one lane as mma.sync operands. k is permuted
// inside the group, identically for the weights (A) and x (B): lane (g, t) holds elements [8t, 8t + 8) of its rows,
// and in step s its fragment columns 2t, 2t + 1 are elements 8t + 4s + {0, 1}, columns 2t + 8, 2t + 9 elements
// 8t + 4s + {2, 3}. The dot products are unchanged, and every operand comes from one 16-byte value per row with no
// shuffles or shared memory. lo / hi: weight rows g and g + 8 (A rows) as bf16x8, x: row g of the x tile.
__device__ __forceinline__ void mma_group(float (&acc)[4], const uint4& lo, const uint4& hi, const uint4& x) {
  const uint32_t step0[4] = {lo.x, hi.x, lo.y, hi.y};
  mma_bf16(acc, step0, x.x, x.y);
  const uint32_t step1[4] = {lo.z, hi.z, lo.w, hi.w};
  mma_bf16(acc, step1, x.z, x.w);
}

}  // namespace qinfer::cuda
