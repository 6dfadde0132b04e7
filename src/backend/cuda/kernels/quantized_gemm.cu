#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemv_mma_epilogue.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/quantized_fragments.cuh"
#include "backend/cuda/kernels/quantized_gemm.h"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

// A staged x row: one 128-k tile plus 32 bf16 of padding, so that the 16-byte loads of a quarter warp (quad rows g,
// g + 1 at offsets 16t) fall into distinct banks.
constexpr int kStagedRowElements = kQuantizedTileK + 32;

// What the reduce kernel gets: the caller's parameters and the number of k splits.
struct GemmReduce {
  QuantizedGemmParams p;
  int splits;
};

// Block (blockIdx.x, blockIdx.y): warp w owns weight rows of 16-row tile blockIdx.x * kWarps + w (gemv_mma_rows) over
// the kTiles 128-k tiles of split blockIdx.y. A decode GEMM is bound by latency more than by bytes or FLOPs, so each
// block requests everything it reads at once: its warps' weight tiles into registers (before waiting for x's
// producer), then all its x tiles (every row) with cp.async into shared memory; one wait, then the multiplies. A lane
// reads its row g's 16 bytes of a 32-k group from shared memory as the GEMV reads them from global memory, and
// mma_group and the fp32 group scale follow.
template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kTiles, int kXTiles>
__global__ void __launch_bounds__(kWarps * 32) quantized_gemm_kernel(QuantizedGemmParams p) {
  constexpr int kRows = kXTiles * kGemvMmaRowsPerTile;
  extern __shared__ uint4 shared_words[];
  // staged_x[tile][row][element]
  auto* staged_x = reinterpret_cast<__nv_bfloat16(*)[kRows][kStagedRowElements]>(shared_words);
  const QuantizedWeightView& w = p.weight;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row_tile = blockIdx.x * kWarps + warp;
  const GemvMmaRows rows = gemv_mma_rows(row_tile, g, w.n, p.swiglu);
  const int tiles = (w.k + kQuantizedTileK - 1) / kQuantizedTileK, groups = w.k / 32;
  const int scale_groups = (w.k + w.group_size - 1) / w.group_size;
  const int first = blockIdx.y * kTiles, count = min(kTiles, tiles - first);
  const int64_t row_words = static_cast<int64_t>(tiles) * kQuantizedTileWords<kFormat>;
  const uint32_t* codes_lo = w.weight + rows.lo * row_words;
  const uint32_t* codes_hi = w.weight + rows.hi * row_words;
  const uint32_t* scales_lo = w.scales + static_cast<int64_t>(rows.lo) * scale_groups;
  const uint32_t* scales_hi = w.scales + static_cast<int64_t>(rows.hi) * scale_groups;

  // Weights never change: they are requested before waiting for the producer of x.
  allow_dependents();
  QuantizedLaneTile<kFormat, kMetaPerTile> lo[kTiles], hi[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
    if (i < count) {
      lo[i] = load_lane_tile<kFormat, kMetaPerTile>(codes_lo, scales_lo, first + i, t, w.group_size, scale_groups);
      hi[i] = load_lane_tile<kFormat, kMetaPerTile>(codes_hi, scales_hi, first + i, t, w.group_size, scale_groups);
    }
  wait_for_producer();
  // Rows past num_rows repeat the last row (their results are dropped); k past the end reads as zero.
  constexpr int kChunksPerRow = kQuantizedTileK / 8;
  for (int chunk = threadIdx.x; chunk < count * kRows * kChunksPerRow; chunk += kWarps * 32) {
    const int i = chunk / (kRows * kChunksPerRow), r = chunk / kChunksPerRow % kRows;
    const int column = chunk % kChunksPerRow * 8, kk = (first + i) * kQuantizedTileK + column;
    const __nv_bfloat16* source = p.x + static_cast<int64_t>(min(r, p.num_rows - 1)) * w.k + min(kk, w.k - 8);
    cp_async_16(&staged_x[i][r][column], source, kk < w.k);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  float acc[kXTiles][4] = {};
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    if (i >= count) break;
#pragma unroll
    for (int group = 0; group < 4; ++group) {
      if ((first + i) * 4 + group >= groups) continue;
      const uint4 frag_lo = group_fragment(lo[i], group), frag_hi = group_fragment(hi[i], group);
      const float s_lo = group_scale(lo[i], group), s_hi = group_scale(hi[i], group);
#pragma unroll
      for (int x_tile = 0; x_tile < kXTiles; ++x_tile) {
        const uint4 x =
            *reinterpret_cast<const uint4*>(&staged_x[i][x_tile * kGemvMmaRowsPerTile + g][32 * group + 8 * t]);
        float part[4] = {};
        mma_group(part, frag_lo, frag_hi, x);
        acc[x_tile][0] = fmaf(s_lo, part[0], acc[x_tile][0]);
        acc[x_tile][1] = fmaf(s_lo, part[1], acc[x_tile][1]);
        acc[x_tile][2] = fmaf(s_hi, part[2], acc[x_tile][2]);
        acc[x_tile][3] = fmaf(s_hi, part[3], acc[x_tile][3]);
      }
    }
  }

  // Accumulator register r of lane (g, t): weight row lo (r < 2) or hi, x row 8 x_tile + 2t + r % 2.
  const int half = w.n / 2, gate = row_tile * 8 + g;
  const int row_lo = row_tile * 16 + g, row_hi = row_lo + 8;
#pragma unroll
  for (int x_tile = 0; x_tile < kXTiles; ++x_tile)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = x_tile * kGemvMmaRowsPerTile + 2 * t + c;
      if (m >= p.num_rows) continue;
      const float sum_lo = acc[x_tile][c], sum_hi = acc[x_tile][2 + c];
      if (gridDim.y > 1) {  // raw partial sums by weight row; the reduce kernel applies the epilogue
        float* partial = p.workspace + (static_cast<int64_t>(blockIdx.y) * p.num_rows + m) * w.n;
        if (p.swiglu) {
          if (gate < half) partial[gate] = sum_lo, partial[half + gate] = sum_hi;
        } else {
          if (row_lo < w.n) partial[row_lo] = sum_lo;
          if (row_hi < w.n) partial[row_hi] = sum_hi;
        }
      } else if (p.swiglu) {
        if (gate < half) store_output(swiglu_of_sums(sum_lo, sum_hi), p.y + static_cast<int64_t>(m) * half + gate);
      } else {
        if (row_lo < w.n) store_output(sum_lo, p.y + static_cast<int64_t>(m) * w.n + row_lo);
        if (row_hi < w.n) store_output(sum_hi, p.y + static_cast<int64_t>(m) * w.n + row_hi);
      }
    }
}

// y[m, j] from the splits' partial sums, added in split order: thread per output element.
__global__ void __launch_bounds__(256) quantized_gemm_reduce_kernel(GemmReduce launch) {
  const QuantizedGemmParams& p = launch.p;
  wait_for_producer();
  allow_dependents();
  const int n = p.weight.n, outputs = p.swiglu ? n / 2 : n;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<int64_t>(p.num_rows) * outputs) return;
  const int m = static_cast<int>(index / outputs), j = static_cast<int>(index % outputs);
  const int64_t split_stride = static_cast<int64_t>(p.num_rows) * n;
  const float* partial = p.workspace + static_cast<int64_t>(m) * n;
  float sum = 0, up = 0;
  for (int s = 0; s < launch.splits; ++s) {
    sum += partial[s * split_stride + j];
    if (p.swiglu) up += partial[s * split_stride + outputs + j];
  }
  store_output(p.swiglu ? swiglu_of_sums(sum, up) : sum, p.y + index);
}

template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kTiles, int kXTiles>
void launch_kernels(const QuantizedGemmParams& p, const KernelStream& stream) {
  const int splits = quantized_gemm_splits({kWarps, kTiles}, p.weight.k);
  const int row_tiles = p.swiglu ? (p.weight.n / 2 + 7) / 8 : (p.weight.n + 15) / 16;
  const dim3 grid((row_tiles + kWarps - 1) / kWarps, splits);
  const auto kernel = quantized_gemm_kernel<kFormat, kMetaPerTile, kWarps, kTiles, kXTiles>;
  const size_t shared_bytes = sizeof(__nv_bfloat16) * kTiles * kXTiles * kGemvMmaRowsPerTile * kStagedRowElements;
  // Per launch, not once: the attribute belongs to the current device.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  launch_dependent(kernel, grid, dim3(kWarps * 32), shared_bytes, stream, p);
  if (splits == 1) return;
  const int64_t outputs = static_cast<int64_t>(p.num_rows) * (p.swiglu ? p.weight.n / 2 : p.weight.n);
  launch_dependent(quantized_gemm_reduce_kernel, dim3(static_cast<unsigned>((outputs + 255) / 256)), dim3(256), 0,
                   stream, GemmReduce{p, splits});
}

template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kTiles>
void launch_rows(const QuantizedGemmParams& p, const KernelStream& stream) {
  if (p.num_rows <= 32)
    launch_kernels<kFormat, kMetaPerTile, kWarps, kTiles, 4>(p, stream);
  else
    launch_kernels<kFormat, kMetaPerTile, kWarps, kTiles, 8>(p, stream);
}

template <QuantizedFormat kFormat, int kMetaPerTile>
void launch_shape(const QuantizedGemmParams& p, const QuantizedGemmShape& shape, const KernelStream& stream) {
  switch (shape.warps * 100 + shape.tiles_per_block) {
    case 402:
      return launch_rows<kFormat, kMetaPerTile, 4, 2>(p, stream);
    case 404:
      return launch_rows<kFormat, kMetaPerTile, 4, 4>(p, stream);
    case 408:
      return launch_rows<kFormat, kMetaPerTile, 4, 8>(p, stream);
    case 802:
      return launch_rows<kFormat, kMetaPerTile, 8, 2>(p, stream);
    case 804:
      return launch_rows<kFormat, kMetaPerTile, 8, 4>(p, stream);
    case 808:
      return launch_rows<kFormat, kMetaPerTile, 8, 8>(p, stream);
    default:
      throw Error(ErrorKind::kInvalidArgument, "quantized GEMM: no kernel for " + std::to_string(shape.warps) +
                                                   " warps x " + std::to_string(shape.tiles_per_block) +
                                                   " tiles per block (4 or 8 x 2, 4 or 8)");
  }
}

}  // namespace

void launch_quantized_gemm(const QuantizedGemmParams& p, const QuantizedGemmShape& shape, const KernelStream& stream) {
  const QuantizedWeightView& w = p.weight;
  QINFER_CHECK(w.k % 32 == 0 && w.group_size % 32 == 0 && w.n > 0, "quantized GEMM: k and group multiples of 32");
  QINFER_CHECK(p.num_rows >= 1 && p.num_rows <= kQuantizedGemmMaxRows, "quantized GEMM: 1..64 rows");
  QINFER_CHECK(!p.swiglu || w.n % 2 == 0, "SwiGLU GEMM: even n");
  if (quantized_gemm_splits(shape, w.k) > 1 && p.workspace == nullptr)
    throw Error(ErrorKind::kInvalidArgument, "quantized GEMM: a launch that splits k needs a workspace");
  QINFER_CHECK(w.format != QuantizedFormat::kFp8Block || w.group_size % kQuantizedTileK == 0, "fp8: 128-k blocks");
  if (w.format == QuantizedFormat::kFp8Block)
    launch_shape<QuantizedFormat::kFp8Block, 1>(p, shape, stream);
  else if (w.group_size % kQuantizedTileK == 0)
    launch_shape<QuantizedFormat::kInt4, 1>(p, shape, stream);
  else
    launch_shape<QuantizedFormat::kInt4, 4>(p, shape, stream);
}

}  // namespace qinfer::cuda
