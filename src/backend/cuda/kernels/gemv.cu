#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per thread and output row

// A block computes kOutputs consecutive outputs for all rows; its 128 threads split k (interleaved 16-byte vectors)
// and reduce through shuffles and shared memory. The narrow o_proj/down_proj (2560 / 2 = 1280 blocks) fit in one
// wave on 132 SMs, so their cost is mostly ramp-up and drain: the prefetch before wait_for_producer() shortens it.
// With p.swiglu a block computes kOutputs / 2 gate rows j.. and the matching up rows half + j.. instead, and stores
// their SwiGLU.
// kOneWave: held to 10 resident blocks per SM (48 registers), so that the narrow one-row grids of o_proj/down (1280
// blocks) fit in one wave on 132 SMs instead of 1.08 waves at 9 blocks per SM, whose last 92 blocks ran nearly alone.
// Wide grids run many waves and are faster with the registers (measured: gate_up 23.6 vs 27.1 µs; docs/CUDA_DESIGN.md,
// "GEMV", has the threshold's measurements).
template <int kMaxRows, int kOutputs, typename OutT, bool kOneWave>
__global__ void __launch_bounds__(kThreads, kOneWave ? 10 : 1) gemv_kernel(GemvParams p) {
  constexpr int kPairs = kOutputs / 2;
  const int half = p.n / 2;
  const int first_output = p.swiglu ? blockIdx.x * kPairs : blockIdx.x * kOutputs;
  const int k_vectors = p.k / 8;
  const __nv_bfloat16* weight_rows[kOutputs];
#pragma unroll
  for (int o = 0; o < kOutputs; ++o) {
    const int row = !p.swiglu    ? min(first_output + o, p.n - 1)
                    : o < kPairs ? min(first_output + o, half - 1)
                                 : half + min(first_output + o - kPairs, half - 1);
    weight_rows[o] = p.weight + static_cast<int64_t>(row) * p.k;
  }

  // The first chunk of weights is fetched before waiting for the producer of x: weights never change, so with
  // programmatic dependent launch this load overlaps the previous kernel's tail.
  uint4 w[kUnroll][kOutputs];
  auto load_weights = [&](int base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * kThreads;
#pragma unroll
      for (int o = 0; o < kOutputs; ++o) w[u][o] = v < k_vectors ? load_streaming(weight_rows[o] + v * 8) : uint4{};
    }
  };
  allow_dependents();
  load_weights(threadIdx.x);
  wait_for_producer();

  float acc[kMaxRows][kOutputs] = {};
  for (int base = threadIdx.x; base < k_vectors; base += kThreads * kUnroll) {
    if (base != static_cast<int>(threadIdx.x)) load_weights(base);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * kThreads;
      if (v >= k_vectors) break;
      float wf[kOutputs][8];
#pragma unroll
      for (int o = 0; o < kOutputs; ++o) {
        Bf16x8 wv;
        wv.raw = w[u][o];
        bf16x8_to_float(wv, wf[o]);
      }
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        if (m >= p.num_rows) break;
        Bf16x8 xv;
        xv.raw = __ldg(reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(m) * p.k + v * 8));
        float xf[8];
        bf16x8_to_float(xv, xf);
#pragma unroll
        for (int o = 0; o < kOutputs; ++o)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[m][o] = fmaf(wf[o][j], xf[j], acc[m][o]);
      }
    }
  }

  __shared__ float partial[kWarps][kMaxRows * kOutputs];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
#pragma unroll
    for (int o = 0; o < kOutputs; ++o) {
      const float sum = warp_sum(acc[m][o]);
      if (lane == 0) partial[warp][m * kOutputs + o] = sum;
    }
  __syncthreads();
  auto reduced = [&](int index) {
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][index];
    return sum;
  };
  if (p.swiglu) {
    for (int index = threadIdx.x; index < p.num_rows * kPairs; index += kThreads) {
      const int m = index / kPairs, j = index % kPairs;
      if (first_output + j >= half) continue;
      const float gate = reduced(m * kOutputs + j), up = reduced(m * kOutputs + kPairs + j);
      store_output(swiglu_of_sums(gate, up),
                   static_cast<OutT*>(p.y) + static_cast<int64_t>(m) * half + first_output + j);
    }
    return;
  }
  for (int index = threadIdx.x; index < p.num_rows * kOutputs; index += kThreads) {
    const int m = index / kOutputs, o = index % kOutputs;
    if (first_output + o >= p.n) continue;
    store_output(reduced(index), static_cast<OutT*>(p.y) + static_cast<int64_t>(m) * p.n + first_output + o);
  }
}

template <int kMaxRows, int kOutputs, bool kOneWave = false>
void launch_rows(const GemvParams& p, const KernelStream& stream) {
  const int outputs_per_block = p.swiglu ? kOutputs / 2 : kOutputs;
  const int outputs = p.swiglu ? p.n / 2 : p.n;
  const unsigned blocks = static_cast<unsigned>((outputs + outputs_per_block - 1) / outputs_per_block);
  launch_dependent(p.y_fp32 ? gemv_kernel<kMaxRows, kOutputs, float, kOneWave>
                            : gemv_kernel<kMaxRows, kOutputs, __nv_bfloat16, kOneWave>,
                   blocks, kThreads, 0, stream, p);
}

}  // namespace

void launch_gemv(const GemvParams& params, const KernelStream& stream) {
  QINFER_CHECK(params.k % 8 == 0 && params.num_rows >= 1 && params.num_rows <= kGemvMaxRows && params.n > 0);
  QINFER_CHECK(!params.swiglu || (params.n % 2 == 0 && !params.y_fp32), "SwiGLU GEMV: even n, bf16 output");
  constexpr int kNarrowOutputs = 4096;  // up to 2048 blocks: one or two waves, where the tail matters
  if (params.num_rows == 1 && params.n <= kNarrowOutputs && !params.swiglu)
    launch_rows<1, 2, true>(params, stream);
  else if (params.num_rows == 1)
    launch_rows<1, 2>(params, stream);
  else if (params.num_rows == 2)
    launch_rows<2, 2>(params, stream);
  else if (params.num_rows <= 4)
    launch_rows<4, 2>(params, stream);
  else if (params.num_rows <= 8)
    launch_rows<8, 4>(params, stream);
  else
    launch_rows<16, 4>(params, stream);
}

}  // namespace qinfer::cuda
