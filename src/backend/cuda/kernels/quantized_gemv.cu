#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemv_mma_epilogue.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/quantized_fragments.cuh"
#include "backend/cuda/kernels/quantized_gemv.h"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

// A block owns 16 weight rows (with SwiGLU 8 gate rows and the matching 8 up rows) and all rows of x (kXTiles tiles
// of 8), as the bf16 tensor-core GEMV. Its warps split k by 128-k tiles: warp w takes tiles w, w + kWarps, ..., and
// holds kInFlight of them in registers at a time; the first kInFlight are requested before the wait for x's producer.
// Per group of a tile a lane decodes both rows to exact bf16 codes, runs one mma_group per x tile into a fresh
// accumulator and adds it scaled by the group's scale: the products are exact and the scale is applied in fp32, once
// per 32 k. Int4 weights are a quarter of bf16's bytes, so a decode linear's whole weight fits in the registers of
// its resident warps: what limits the kernel is how early the bytes are requested, not the multiply.
template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kInFlight, int kXTiles, typename OutT>
__global__ void __launch_bounds__(kWarps * 32) quantized_gemv_kernel(QuantizedGemvParams p) {
  const QuantizedWeightView& w = p.weight;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const GemvMmaRows rows = gemv_mma_rows(blockIdx.x, g, w.n, p.swiglu);
  const int tiles = (w.k + kQuantizedTileK - 1) / kQuantizedTileK, groups = w.k / 32;
  const int scale_groups = (w.k + w.group_size - 1) / w.group_size;
  const int64_t row_words = static_cast<int64_t>(tiles) * kQuantizedTileWords<kFormat>;
  const uint32_t* codes_lo = w.weight + rows.lo * row_words;
  const uint32_t* codes_hi = w.weight + rows.hi * row_words;
  const uint32_t* scales_lo = w.scales + static_cast<int64_t>(rows.lo) * scale_groups;
  const uint32_t* scales_hi = w.scales + static_cast<int64_t>(rows.hi) * scale_groups;

  QuantizedLaneTile<kFormat, kMetaPerTile> lo[kInFlight], hi[kInFlight];
  auto load_tiles = [&](int first) {
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int tile = first + i * kWarps;
      if (tile < tiles) {
        lo[i] = load_lane_tile<kFormat, kMetaPerTile>(codes_lo, scales_lo, tile, t, w.group_size, scale_groups);
        hi[i] = load_lane_tile<kFormat, kMetaPerTile>(codes_hi, scales_hi, tile, t, w.group_size, scale_groups);
      }
    }
  };
  // Weights never change: they are requested before waiting for the producer of x.
  allow_dependents();
  load_tiles(warp);
  wait_for_producer();

  float acc[kXTiles][4] = {};
  for (int first = warp; first < tiles; first += kInFlight * kWarps) {
    if (first != warp) load_tiles(first);
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int tile = first + i * kWarps;
      if (tile >= tiles) continue;
#pragma unroll
      for (int x_tile = 0; x_tile < kXTiles; ++x_tile) {
        const int m = x_tile * kGemvMmaRowsPerTile + g;
        const __nv_bfloat16* x_row =
            p.x + static_cast<int64_t>(min(m, p.num_rows - 1)) * w.k + tile * kQuantizedTileK + 8 * t;
        uint4 x[4];
#pragma unroll
        for (int group = 0; group < 4; ++group)
          x[group] = m < p.num_rows && tile * 4 + group < groups
                         ? __ldg(reinterpret_cast<const uint4*>(x_row + 32 * group))
                         : uint4{};
#pragma unroll
        for (int group = 0; group < 4; ++group) {
          if (tile * 4 + group >= groups) continue;
          const float s_lo = group_scale(lo[i], group), s_hi = group_scale(hi[i], group);
          float part[4] = {};
          mma_group(part, group_fragment(lo[i], group), group_fragment(hi[i], group), x[group]);
          acc[x_tile][0] = fmaf(s_lo, part[0], acc[x_tile][0]);
          acc[x_tile][1] = fmaf(s_lo, part[1], acc[x_tile][1]);
          acc[x_tile][2] = fmaf(s_hi, part[2], acc[x_tile][2]);
          acc[x_tile][3] = fmaf(s_hi, part[3], acc[x_tile][3]);
        }
      }
    }
  }

  store_gemv_mma_block<kWarps, kXTiles, OutT>(acc, p.y, p.num_rows, w.n, p.swiglu);
}

template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kInFlight, int kXTiles>
void launch_tiles(const QuantizedGemvParams& p, const KernelStream& stream) {
  const int outputs_per_block = p.swiglu ? 8 : 16;
  const int outputs = p.swiglu ? p.weight.n / 2 : p.weight.n;
  const unsigned blocks = static_cast<unsigned>((outputs + outputs_per_block - 1) / outputs_per_block);
  const auto kernel = p.y_fp32
                          ? quantized_gemv_kernel<kFormat, kMetaPerTile, kWarps, kInFlight, kXTiles, float>
                          : quantized_gemv_kernel<kFormat, kMetaPerTile, kWarps, kInFlight, kXTiles, __nv_bfloat16>;
  launch_dependent(kernel, blocks, kWarps * 32, 0, stream, p);
}

template <QuantizedFormat kFormat, int kMetaPerTile, int kWarps, int kInFlight>
void launch_rows(const QuantizedGemvParams& p, const KernelStream& stream) {
  if (p.num_rows <= kGemvMmaRowsPerTile)
    launch_tiles<kFormat, kMetaPerTile, kWarps, kInFlight, 1>(p, stream);
  else
    launch_tiles<kFormat, kMetaPerTile, kWarps, kInFlight, 2>(p, stream);
}

template <QuantizedFormat kFormat, int kMetaPerTile>
void launch_shape(const QuantizedGemvParams& p, QuantizedGemvShape shape, const KernelStream& stream) {
  switch (shape.warps * 100 + shape.tiles_in_flight) {
    case 402:
      return launch_rows<kFormat, kMetaPerTile, 4, 2>(p, stream);
    case 405:
      return launch_rows<kFormat, kMetaPerTile, 4, 5>(p, stream);
    case 802:
      return launch_rows<kFormat, kMetaPerTile, 8, 2>(p, stream);
    case 805:
      return launch_rows<kFormat, kMetaPerTile, 8, 5>(p, stream);
    case 1602:
      return launch_rows<kFormat, kMetaPerTile, 16, 2>(p, stream);
    case 1605:
      return launch_rows<kFormat, kMetaPerTile, 16, 5>(p, stream);
    default:
      throw Error(ErrorKind::kInvalidArgument, "quantized GEMV: no kernel for " + std::to_string(shape.warps) +
                                                   " warps x " + std::to_string(shape.tiles_in_flight) +
                                                   " tiles in flight (4, 8 or 16 x 2 or 5)");
  }
}

}  // namespace

const std::vector<QuantizedGemvShape>& quantized_gemv_shapes() {
  static const std::vector<QuantizedGemvShape> kShapes = {{4, 2}, {4, 5}, {8, 2}, {8, 5}, {16, 2}, {16, 5}};
  return kShapes;
}

QuantizedGemvShape quantized_gemv_default_shape(const QuantizedWeightView& weight) {
  // Measured on the 4B's shapes at 1 row (docs/CUDA_DESIGN.md, "Quantized linears"): the widest outputs (gate_up,
  // 1 216 blocks) are fastest with four warps and two tiles in flight; qkv (384 blocks) with four warps whose five
  // tiles cover its k; the narrow outputs (o_proj, down: 160 blocks) need eight warps per block, int4 with five tiles
  // (a whole k of 4096 in flight), fp8 (twice the registers per tile) with two.
  if (weight.n > 8192) return {4, 2};
  if (weight.n > 4096) return {4, 5};
  return weight.format == QuantizedFormat::kInt4 ? QuantizedGemvShape{8, 5} : QuantizedGemvShape{8, 2};
}

void launch_quantized_gemv(const QuantizedGemvParams& p, QuantizedGemvShape shape, const KernelStream& stream) {
  const QuantizedWeightView& w = p.weight;
  QINFER_CHECK(w.k % 32 == 0 && w.group_size % 32 == 0 && w.n > 0, "quantized GEMV: k and group multiples of 32");
  QINFER_CHECK(p.num_rows >= 1 && p.num_rows <= kQuantizedGemvMaxRows, "quantized GEMV: 1..16 rows");
  QINFER_CHECK(!p.swiglu || (w.n % 2 == 0 && !p.y_fp32), "SwiGLU GEMV: even n, bf16 output");
  QINFER_CHECK(w.format != QuantizedFormat::kFp8Block || w.group_size % kQuantizedTileK == 0, "fp8: 128-k blocks");
  if (w.format == QuantizedFormat::kFp8Block)
    launch_shape<QuantizedFormat::kFp8Block, 1>(p, shape, stream);
  else if (w.group_size % kQuantizedTileK == 0)
    launch_shape<QuantizedFormat::kInt4, 1>(p, shape, stream);
  else
    launch_shape<QuantizedFormat::kInt4, 4>(p, shape, stream);
}

}  // namespace qinfer::cuda
