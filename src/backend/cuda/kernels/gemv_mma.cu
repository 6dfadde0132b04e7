#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/gemv_mma_epilogue.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

constexpr int kGroupK = 32;  // k per group: one lane's 16 bytes of a weight row feed two m16n8k16 steps

// A block owns 16 weight rows (with SwiGLU 8 gate rows and the matching 8 up rows, so that a lane's accumulators hold
// gate and up of the same output) and all rows of x (kTiles tiles of 8). Its warps split k: warp w takes the 32-k
// groups w, w + kWarps, ..., kInFlight of them per iteration, so that at any time a block's loads cover kInFlight
// runs of kWarps · 64 contiguous bytes per weight row (gemv_mma_epilogue.cuh adds the warps' accumulators).
// Registers are held to 64 so that 1024 threads fit per SM: the narrow shapes have only 160 blocks.
template <int kWarps, int kInFlight, int kTiles, typename OutT>
__global__ void __launch_bounds__(kWarps * 32, 1024 / (kWarps * 32)) gemv_mma_kernel(GemvParams p) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const GemvMmaRows rows = gemv_mma_rows(blockIdx.x, g, p.n, p.swiglu);
  const __nv_bfloat16* w_lo = p.weight + static_cast<int64_t>(rows.lo) * p.k + 8 * t;
  const __nv_bfloat16* w_hi = p.weight + static_cast<int64_t>(rows.hi) * p.k + 8 * t;
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
      const int m = tile * kGemvMmaRowsPerTile + g;
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

  store_gemv_mma_block<kWarps, kTiles, OutT>(acc, p.y, p.num_rows, p.n, p.swiglu);
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
  if (p.num_rows <= kGemvMmaRowsPerTile)
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
  return params.k % kGroupK == 0 && params.num_rows >= 1 && params.num_rows <= 2 * kGemvMmaRowsPerTile && params.n > 0;
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
