#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/quantized_fragments.cuh"
#include "backend/cuda/kernels/quantized_gemv.h"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per (row, 128-k tile, 32-k group, lane share t): elements 32 group + 8t .. + 8 of the tile, scaled in
// fp32 and rounded to bf16, one 16-byte store; consecutive threads store consecutive 16 bytes. The four threads of a
// lane share load the same 16 (int4) or 32 (fp8) bytes, the second to fourth from L1.
template <QuantizedFormat kFormat>
__global__ void __launch_bounds__(kThreads) dequantize_weight_kernel(QuantizedWeightView w, __nv_bfloat16* out) {
  const int tiles = (w.k + kQuantizedTileK - 1) / kQuantizedTileK, groups = w.k / 32;
  const int scale_groups = (w.k + w.group_size - 1) / w.group_size;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int t = static_cast<int>(index % 4);
  const int group = static_cast<int>(index / 4 % 4);
  const int tile = static_cast<int>(index / 16 % tiles);
  const int64_t row = index / 16 / tiles;
  if (row >= w.n || tile * 4 + group >= groups) return;
  const int64_t row_words = static_cast<int64_t>(tiles) * kQuantizedTileWords<kFormat>;
  const QuantizedLaneTile<kFormat, 4> lane_tile = load_lane_tile<kFormat, 4>(
      w.weight + row * row_words, w.scales + row * scale_groups, tile, t, w.group_size, scale_groups);
  // The group is a runtime index here: select its fragment and scale among the four.
  Bf16x8 codes;
  float scale = 0;
#pragma unroll
  for (int g = 0; g < 4; ++g)
    if (g == group) {
      codes.raw = group_fragment(lane_tile, g);
      scale = group_scale(lane_tile, g);
    }
  float values[8];
  bf16x8_to_float(codes, values);
#pragma unroll
  for (float& value : values) value *= scale;
  *reinterpret_cast<uint4*>(out + row * w.k + (tile * 4 + group) * 32 + 8 * t) = float_to_bf16x8(values).raw;
}

}  // namespace

void launch_dequantize_weight(const QuantizedWeightView& w, __nv_bfloat16* out, const KernelStream& stream) {
  QINFER_CHECK(w.k % 32 == 0 && w.group_size % 32 == 0 && w.n > 0, "dequantize: k and group multiples of 32");
  const int64_t threads = static_cast<int64_t>(w.n) * ((w.k + kQuantizedTileK - 1) / kQuantizedTileK) * 16;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  if (w.format == QuantizedFormat::kInt4)
    dequantize_weight_kernel<QuantizedFormat::kInt4><<<blocks, kThreads, 0, stream.stream>>>(w, out);
  else
    dequantize_weight_kernel<QuantizedFormat::kFp8Block><<<blocks, kThreads, 0, stream.stream>>>(w, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace qinfer::cuda
