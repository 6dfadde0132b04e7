#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

constexpr int kGroupK = 32;  // k per group: one lane's 16 bytes of a weight row feed two m16n8k16 steps
constexpr int kRowsPerTile = 8;

// One 32-k group of one lane as mma.sync operands. k is permuted inside the group, identically for the weights (A)
// and x (B): lane (g, t) loads elements [8t, 8t + 8) of its rows, and in step s its fragment columns 2t, 2t + 1 are
// elements 8t + 4s + {0, 1}, columns 2t + 8, 2t + 9 elements 8t + 4s + {2, 3}. The dot products are unchanged, and
// every operand comes from one 16-byte load per row with no shuffles or shared memory.
// acc += W[16 rows × 32 k] · x[32 k × 8 rows]; lo / hi: weight rows g and g + 8 (A rows), x: row g of the x tile.
__device__ __forceinline__ void mma_group(float (&acc)[4], const uint4& lo, const uint4& hi, const uint4& x) {
  const uint32_t step0[4] = {lo.x, hi.x, lo.y, hi.y};
  mma_bf16(acc, step0, x.x, x.y);
  const uint32_t step1[4] = {lo.z, hi.z, lo.w, hi.w};
  mma_bf16(acc, step1, x.z, x.w);
}

// A block owns 16 weight rows (with SwiGLU 8 gate rows and the matching 8 up rows, so that a lane's accumulators hold
// gate and up of the same output) and all rows of x (kTiles tiles of 8). Its warps split k: warp w takes the 32-k
// groups w, w + kWarps, ..., kInFlight of them per iteration, so that at any time a block's loads cover kInFlight
// runs of kWarps · 64 contiguous bytes per weight row. The warps' accumulators are added in warp order through shared
// memory: the result does not depend on timing, and a row of x gets the same bits whatever the other rows hold.
// Registers are held to 64 so that 1024 threads fit per SM: the narrow shapes have only 160 blocks.
template <int kWarps, int kInFlight, int kTiles, typename OutT>
__global__ void __launch_bounds__(kWarps * 32, 1024 / (kWarps * 32)) gemv_mma_kernel(GemvParams p) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int half = p.n / 2;
  const int first_gate = blockIdx.x * 8;
  const int row_lo = p.swiglu ? min(first_gate + g, half - 1) : min(blockIdx.x * 16 + g, p.n - 1);
  const int row_hi = p.swiglu ? half + row_lo : min(blockIdx.x * 16 + 8 + g, p.n - 1);
  const __nv_bfloat16* w_lo = p.weight + static_cast<int64_t>(row_lo) * p.k + 8 * t;
  const __nv_bfloat16* w_hi = p.weight + static_cast<int64_t>(row_hi) * p.k + 8 * t;
  const int groups = p.k / kGroupK;

  // Weights never change: the first groups are requested before waiting for the producer of x.
  uint4 lo[kInFlight], hi[kInFlight];
  auto load_weights = [&](int first) {
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int group = first + i * kWarps;
      lo[i] = group < groups ? load_streaming(w_lo + group * kGroupK) : uint4{};
      hi[i] = group < groups ? load_streaming(w_hi + group * kGroupK) : uint4{};
    }
  };
  allow_dependents();
  load_weights(warp);
  wait_for_producer();

  float acc[kTiles][4] = {};
  for (int first = warp; first < groups; first += kInFlight * kWarps) {
    if (first != warp) load_weights(first);
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      // One x tile at a time (its 16-byte loads hit L1/L2 and are few): the weights' registers are what must stay.
      const int m = tile * kRowsPerTile + g;
      const __nv_bfloat16* x_row = p.x + static_cast<int64_t>(min(m, p.num_rows - 1)) * p.k + 8 * t;
      uint4 x[kInFlight];
#pragma unroll
      for (int i = 0; i < kInFlight; ++i) {
        const int group = first + i * kWarps;
        x[i] =
            m < p.num_rows && group < groups ? __ldg(reinterpret_cast<const uint4*>(x_row + group * kGroupK)) : uint4{};
      }
#pragma unroll
      for (int i = 0; i < kInFlight; ++i) mma_group(acc[tile], lo[i], hi[i], x[i]);
    }
  }

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
  // Accumulator register r of lane l: weight row l / 4 + 8 · (r / 2) of the block, x row 2 · (l % 4) + r % 2 of the
  // tile.
  if (p.swiglu) {
    for (int index = threadIdx.x; index < kTiles * 2 * 32; index += kWarps * 32) {
      const int l = index % 32, c = index / 32 % 2, tile = index / 64;
      const int m = tile * kRowsPerTile + 2 * (l % 4) + c, j = first_gate + l / 4;
      if (m >= p.num_rows || j >= half) continue;
      const float gate = reduced(tile, c, l), up = reduced(tile, 2 + c, l);
      store_output(swiglu_of_sums(gate, up), static_cast<OutT*>(p.y) + static_cast<int64_t>(m) * half + j);
    }
    return;
  }
  for (int index = threadIdx.x; index < kTiles * 4 * 32; index += kWarps * 32) {
    const int l = index % 32, r = index / 32 % 4, tile = index / 128;
    const int m = tile * kRowsPerTile + 2 * (l % 4) + r % 2, row = blockIdx.x * 16 + l / 4 + 8 * (r / 2);
    if (m >= p.num_rows || row >= p.n) continue;
    store_output(reduced(tile, r, l), static_cast<OutT*>(p.y) + static_cast<int64_t>(m) * p.n + row);
  }
}

template <int kWarps, int kInFlight, int kTiles>
void launch_tiles(const GemvParams& p, const KernelStream& stream) {
  const int outputs_per_block = p.swiglu ? 8 : 16;
  const int outputs = p.swiglu ? p.n / 2 : p.n;
  const unsigned blocks = static_cast<unsigned>((outputs + outputs_per_block - 1) / outputs_per_block);
  const auto kernel = p.y_fp32 ? gemv_mma_kernel<kWarps, kInFlight, kTiles, float>
                               : gemv_mma_kernel<kWarps, kInFlight, kTiles, __nv_bfloat16>;
  launch_dependent(kernel, blocks, kWarps * 32, 0, stream, p);
}

template <int kWarps, int kInFlight>
void launch_shape(const GemvParams& p, const KernelStream& stream) {
  if (p.num_rows <= kRowsPerTile)
    launch_tiles<kWarps, kInFlight, 1>(p, stream);
  else
    launch_tiles<kWarps, kInFlight, 2>(p, stream);
}

}  // namespace

const std::vector<GemvMmaShape>& gemv_mma_shapes() {
  static const std::vector<GemvMmaShape> kShapes = {{4, 2}, {4, 4}, {8, 2}, {8, 4}, {16, 2}, {16, 4}};
  return kShapes;
}

bool gemv_mma_supports(const GemvParams& params) {
  return params.k % kGroupK == 0 && params.num_rows >= 1 && params.num_rows <= 2 * kRowsPerTile && params.n > 0;
}

GemvMmaShape gemv_mma_default_shape(int n) {
  // Narrow outputs have few 16-row blocks (o_proj / down: 160), so more warps split k to keep bytes in flight; two
  // groups in flight beat four everywhere (four spill at 9-16 rows and hold fewer blocks per SM; docs/CUDA_DESIGN.md,
  // "Tensor-core GEMV").
  return n <= 4096 ? GemvMmaShape{16, 2} : GemvMmaShape{8, 2};
}

void launch_gemv_mma(const GemvParams& params, GemvMmaShape shape, const KernelStream& stream) {
  QINFER_CHECK(gemv_mma_supports(params), "tensor-core GEMV: k a multiple of 32, 1..16 rows");
  QINFER_CHECK(!params.swiglu || (params.n % 2 == 0 && !params.y_fp32), "SwiGLU GEMV: even n, bf16 output");
  const int key = shape.warps * 100 + shape.groups_in_flight;
  switch (key) {
    case 402:
      return launch_shape<4, 2>(params, stream);
    case 404:
      return launch_shape<4, 4>(params, stream);
    case 802:
      return launch_shape<8, 2>(params, stream);
    case 804:
      return launch_shape<8, 4>(params, stream);
    case 1602:
      return launch_shape<16, 2>(params, stream);
    case 1604:
      return launch_shape<16, 4>(params, stream);
    default:
      throw Error(ErrorKind::kInvalidArgument, "tensor-core GEMV: no kernel for " + std::to_string(shape.warps) +
                                                   " warps x " + std::to_string(shape.groups_in_flight) +
                                                   " groups in flight (4, 8 or 16 x 2 or 4)");
  }
}

}  // namespace qinfer::cuda
