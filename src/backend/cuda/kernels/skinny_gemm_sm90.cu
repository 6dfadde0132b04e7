#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/device_math.cuh"
#include "backend/cuda/kernels/device_probe.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/skinny_gemm.h"
#include "backend/cuda/kernels/tensor_map.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda {

namespace {

constexpr int kWarpgroupThreads = 128;
constexpr int kTileN = 128;                       // weight rows per tile: the wgmma N
constexpr int kTileK = 64;                        // k per unit and stage: one 128-byte swizzled row
constexpr int kBoxRows = 64;                      // rows of one bulk copy box
constexpr int kBoxBytes = kBoxRows * kTileK * 2;  // 8 KB
constexpr int kAccBlocks = kTileN / 8;            // n8 blocks of a thread's accumulators
constexpr int kMaxMTiles = kSkinnyGemmMaxRows / 64;
constexpr int kRingBytes = 192 * 1024;  // one block per SM: under load a weight byte takes microseconds to arrive, so
                                        // each SM keeps 128 KB (96 KB with 128 rows) of weights in flight

// Shared memory of a block with kMTiles consumer warpgroups (64 rows of x each), from a 1024-byte boundary:
// [kStages][weight tile: 128 rows x 64 k][kMTiles x tiles: 64 rows x 64 k], then full[kStages], empty[kStages]
// barriers and the "last block" flag. Every tile is 128-byte swizzled (hopper_wgmma.cuh).
template <int kMTiles>
struct Layout {
  static constexpr int kConsumerThreads = kMTiles * kWarpgroupThreads;
  static constexpr int kThreads = kConsumerThreads + 32;  // + one producer warp
  static constexpr int kWeightBytes = kTileN * kTileK * 2;
  static constexpr int kStageBytes = kWeightBytes + kMTiles * kBoxBytes;
  static constexpr int kStages = kRingBytes / kStageBytes;
  static constexpr int kBarrierOffset = kStages * kStageBytes;
  static constexpr int kFlagOffset = kBarrierOffset + 2 * kStages * 8;
  static constexpr int kBytes = kFlagOffset + 16 + 1024;  // + slack to align the start to 1024
};
// Partial sums of one tile segment: [kAccBlocks][consumer threads] float4, at most this many bytes.
constexpr size_t kMaxPartialBytes = static_cast<size_t>(kAccBlocks) * Layout<kMaxMTiles>::kConsumerThreads * 16;

// Block b streams units [b * units / blocks, (b + 1) * units / blocks) of the tile-major order (unit u: tile
// u / k_units, k range (u % k_units) * 64 + [0, 64)). Only a block's first and last segments can be parts of a tile;
// their partial sums go to partials[b][0] (first) and [b][1] (last), and the tile's counter is counters[2 * f + s]
// for its first contributor f and that block's slot s.
struct UnitRange {
  int units, blocks, k_units;
  __host__ __device__ int begin(int block) const {
    return static_cast<int>(static_cast<int64_t>(block) * units / blocks);
  }
  __device__ int block_of(int unit) const {
    int block = static_cast<int>(static_cast<int64_t>(unit) * blocks / units);
    while (begin(block) > unit) --block;
    while (begin(block + 1) <= unit) ++block;
    return block;
  }
  // 0 when `tile` is the first segment of `block` (it starts at or inside the tile), else 1.
  __device__ int slot(int block, int tile) const { return begin(block) >= tile * k_units ? 0 : 1; }
};

// The kernel's one parameter: the tensor maps must live in parameter space (__grid_constant__).
struct SkinnyGemmLaunch {
  CUtensorMap x_map;  // x [num_rows, k], boxes of 64 rows x 64 k
  CUtensorMap w_map;  // weight [n, k], boxes of 64 rows x 64 k
  SkinnyGemmParams p;
  UnitRange range;
};

__device__ __forceinline__ void store_output(float value, __nv_bfloat16* y) { *y = __float2bfloat16(value); }
__device__ __forceinline__ void store_output(float value, float* y) { *y = value; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Producer (one lane): stage i % kStages receives the block's unit i: two weight boxes (tile rows 0-63 and 64-127,
// or with SwiGLU 64 gate rows and the 64 matching up rows) and one x box per consumer. The first stages' weights are
// requested before waiting for the kernel that writes x.
template <int kMTiles>
__device__ __forceinline__ void produce(const SkinnyGemmLaunch& launch, unsigned char* shared, uint64_t* full,
                                        uint64_t* empty, int first_unit, int count) {
  using L = Layout<kMTiles>;
  const SkinnyGemmParams& p = launch.p;
  const int k_units = launch.range.k_units;
  const auto stage_address = [&](int i) { return sm90::shared_address(shared + (i % L::kStages) * L::kStageBytes); };
  const auto load_weights = [&](int i) {
    uint64_t* barrier = &full[i % L::kStages];
    sm90::mbarrier_arrive_expect_tx(barrier, L::kStageBytes);
    const int tile = (first_unit + i) / k_units, column = (first_unit + i) % k_units * kTileK;
    const int first_row = p.swiglu ? tile * kBoxRows : tile * kTileN;
    const int second_row = p.swiglu ? p.n / 2 + tile * kBoxRows : tile * kTileN + kBoxRows;
    sm90::tma_load_2d(stage_address(i), &launch.w_map, column, first_row, barrier);
    sm90::tma_load_2d(stage_address(i) + kBoxBytes, &launch.w_map, column, second_row, barrier);
  };
  const auto load_x = [&](int i) {
    const int column = (first_unit + i) % k_units * kTileK;
#pragma unroll
    for (int m = 0; m < kMTiles; ++m)
      sm90::tma_load_2d(stage_address(i) + L::kWeightBytes + m * kBoxBytes, &launch.x_map, column, m * kBoxRows,
                        &full[i % L::kStages]);
  };
  const int prefetched = min(L::kStages, count);
  for (int i = 0; i < prefetched; ++i) load_weights(i);
  wait_for_producer();
  for (int i = 0; i < prefetched; ++i) load_x(i);
  for (int i = L::kStages; i < count; ++i) {
    sm90::mbarrier_wait(&empty[i % L::kStages], (i / L::kStages - 1) & 1);
    load_weights(i);
    load_x(i);
  }
}

// A segment of `tile` that is not the whole tile: its partial sums go to scratch; the last contributor to arrive adds
// all contributors' sums in block order (the same sum whatever the arrival order) into acc and returns true, the
// others return false.
template <int kMTiles>
__device__ __forceinline__ bool reduce_tile(const SkinnyGemmLaunch& launch, float (&acc)[kAccBlocks][4], int* last_flag,
                                            int tile) {
  using L = Layout<kMTiles>;
  const UnitRange& r = launch.range;
  auto* partials = reinterpret_cast<float4*>(launch.p.split_partials);
  const auto slot = [&](int block, int b) {
    return ((static_cast<size_t>(block) * 2 + r.slot(block, tile)) * kAccBlocks + b) * L::kConsumerThreads +
           threadIdx.x;
  };
  const int block = static_cast<int>(blockIdx.x);
#pragma unroll
  for (int b = 0; b < kAccBlocks; ++b)
    __stcg(&partials[slot(block, b)], make_float4(acc[b][0], acc[b][1], acc[b][2], acc[b][3]));
  __threadfence();
  sm90::named_barrier_sync(1, L::kConsumerThreads);
  const int first = r.block_of(tile * r.k_units), last = r.block_of((tile + 1) * r.k_units - 1);
  if (threadIdx.x == 0) {
    uint32_t* counter = &launch.p.split_counters[2 * first + r.slot(first, tile)];
    const bool is_last = atomicAdd(counter, 1u) == static_cast<uint32_t>(last - first);
    if (is_last) atomicExch(counter, 0u);
    *last_flag = is_last;
  }
  sm90::named_barrier_sync(1, L::kConsumerThreads);
  if (!*last_flag) return false;
  __threadfence();
  float4 sum[kAccBlocks];
#pragma unroll
  for (int b = 0; b < kAccBlocks; ++b) sum[b] = __ldcg(&partials[slot(first, b)]);
  for (int contributor = first + 1; contributor <= last; ++contributor) {
    float4 part[kAccBlocks];  // all loads of a contributor in flight before the adds
#pragma unroll
    for (int b = 0; b < kAccBlocks; ++b) part[b] = __ldcg(&partials[slot(contributor, b)]);
#pragma unroll
    for (int b = 0; b < kAccBlocks; ++b)
      sum[b].x += part[b].x, sum[b].y += part[b].y, sum[b].z += part[b].z, sum[b].w += part[b].w;
  }
#pragma unroll
  for (int b = 0; b < kAccBlocks; ++b)
    acc[b][0] = sum[b].x, acc[b][1] = sum[b].y, acc[b][2] = sum[b].z, acc[b][3] = sum[b].w;
  return true;
}

// Accumulator layout (hopper_wgmma.cuh): element e of block b is row 16 * warp + lane / 4 + 8 * (e / 2), tile column
// 8 * b + 2 * (lane % 4) + e % 2. With SwiGLU, blocks 0-7 hold gate columns and blocks 8-15 the matching up columns.
template <typename OutT>
__device__ __forceinline__ void store_tile(const SkinnyGemmParams& p, const float (&acc)[kAccBlocks][4], int tile,
                                           int first_row) {
  const int lane = threadIdx.x % 32;
  OutT* y = static_cast<OutT*>(p.y);
#pragma unroll
  for (int b = 0; b < kAccBlocks; ++b)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = first_row + 8 * (e / 2);
      const int column = 8 * b + 2 * (lane % 4) + e % 2;
      if (row >= p.num_rows) continue;
      if (p.swiglu) {
        const int half = p.n / 2, j = tile * kBoxRows + column;
        if (b >= kAccBlocks / 2 || j >= half) continue;
        // The linear's outputs are bf16 in HF before the activation reads them.
        const float gate = __bfloat162float(__float2bfloat16(acc[b][e]));
        const float up = __bfloat162float(__float2bfloat16(acc[b + kAccBlocks / 2][e]));
        store_output(swiglu(gate, up), y + static_cast<int64_t>(row) * half + j);
      } else {
        const int n = tile * kTileN + column;
        if (n < p.n) store_output(acc[b][e], y + static_cast<int64_t>(row) * p.n + n);
      }
    }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (range.blocks): persistent blocks, one per SM. Consumer warpgroup m multiplies rows [64m, 64m + 64) of x with
// the weights of the block's units, one tile segment at a time.
template <int kMTiles, typename OutT>
__global__ void __launch_bounds__(Layout<kMTiles>::kThreads, 1)
    skinny_gemm_kernel(const __grid_constant__ SkinnyGemmLaunch launch) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<kMTiles>;
  const UnitRange& r = launch.range;
  const int first_unit = r.begin(blockIdx.x), count = r.begin(blockIdx.x + 1) - first_unit;

  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (sm90::shared_address(shared_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + L::kBarrierOffset);
  uint64_t* empty = full + L::kStages;
  int* last_flag = reinterpret_cast<int*>(shared + L::kFlagOffset);
  if (threadIdx.x == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], L::kConsumerThreads / 32);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  allow_dependents();

  if (threadIdx.x >= L::kConsumerThreads) {
    if (threadIdx.x == L::kConsumerThreads) produce<kMTiles>(launch, shared, full, empty, first_unit, count);
    wait_for_producer();
    return;
  }

  wait_for_producer();  // x's producer is done before y or the scratch is written
  const int consumer = threadIdx.x / kWarpgroupThreads, warp = threadIdx.x % kWarpgroupThreads / 32;
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < count;) {
    const int tile = (first_unit + i) / r.k_units;
    const int tile_begin = tile * r.k_units, tile_end = tile_begin + r.k_units;
    const bool whole_tile = first_unit + i == tile_begin && first_unit + count >= tile_end;
    const int segment_end = min(count, tile_end - first_unit);
    float acc[kAccBlocks][4] = {};
    // Unit i's products are issued before waiting for unit i - 1's: the tensor cores chain them on the accumulators
    // without a drain per unit, and unit i - 1's stage goes back to the producer once its group has completed.
    const auto release = [&](int unit) {
      __syncwarp();
      if (lane == 0) sm90::mbarrier_arrive(&empty[unit % L::kStages]);
    };
    const int segment_begin = i;
    for (; i < segment_end; ++i) {
      const int stage = i % L::kStages;
      sm90::mbarrier_wait(&full[stage], (i / L::kStages) & 1);
      const uint32_t base = sm90::shared_address(shared + stage * L::kStageBytes);
      const uint64_t w_descriptor = sm90::swizzled_descriptor(base, 16);
      const uint64_t x_descriptor = sm90::swizzled_descriptor(base + L::kWeightBytes + consumer * kBoxBytes, 16);
      sm90::wgmma_fence_operands(acc);
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTileK / 16; ++kk)
        sm90::wgmma_m64n128k16_ss(acc, sm90::advance_descriptor(x_descriptor, kk * 32),
                                  sm90::advance_descriptor(w_descriptor, kk * 32), false);
      sm90::wgmma_commit();
      sm90::wgmma_wait<1>();
      sm90::wgmma_fence_operands(acc);
      if (i > segment_begin) release(i - 1);
    }
    sm90::wgmma_wait<0>();
    sm90::wgmma_fence_operands(acc);
    release(segment_end - 1);
    if (whole_tile || reduce_tile<kMTiles>(launch, acc, last_flag, tile))
      store_tile<OutT>(launch.p, acc, tile, consumer * 64 + warp * 16 + lane / 4);
  }
#else
  (void)launch;
#endif
}

int device_sms() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

int tiles_of(const SkinnyGemmParams& p) {
  return p.swiglu ? (p.n / 2 + kBoxRows - 1) / kBoxRows : (p.n + kTileN - 1) / kTileN;
}

template <int kMTiles, typename OutT>
void launch_with(const SkinnyGemmLaunch& launch, cudaStream_t stream) {
  using L = Layout<kMTiles>;
  const auto kernel = skinny_gemm_kernel<kMTiles, OutT>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
  launch_dependent(kernel, static_cast<unsigned>(launch.range.blocks), L::kThreads, L::kBytes, stream, launch);
}

}  // namespace

bool skinny_gemm_available() {
#if defined(QINFER_HAVE_SM90A)
  return device_is_compute_90();
#else
  return false;
#endif
}

// Two partial segments per block, at most one block per SM.
size_t skinny_gemm_partials_bytes(int num_sms) {
  return skinny_gemm_available() ? 2 * static_cast<size_t>(num_sms) * kMaxPartialBytes : 0;
}

int skinny_gemm_max_counters(int num_sms) { return skinny_gemm_available() ? 2 * num_sms : 0; }

void launch_skinny_gemm(const SkinnyGemmParams& params, cudaStream_t stream) {
  QINFER_CHECK(skinny_gemm_available(), "the skinny GEMM needs an sm_90a build on compute 9.0");
  QINFER_CHECK(params.num_rows >= 1 && params.num_rows <= kSkinnyGemmMaxRows && params.n > 0 && params.k > 0 &&
               params.k % kTileK == 0);
  QINFER_CHECK(!params.swiglu || (params.n % 2 == 0 && !params.y_fp32), "SwiGLU skinny GEMM: even n, bf16 output");
  const int num_sms = device_sms();
  QINFER_CHECK(params.blocks >= 0 && params.blocks <= num_sms, "skinny GEMM: at most one block per SM");
  QINFER_CHECK(params.split_partials != nullptr && params.split_counters != nullptr,
               "skinny GEMM: scratch for shared tiles missing");
  SkinnyGemmLaunch launch;
  launch.p = params;
  launch.range.k_units = params.k / kTileK;
  launch.range.units = tiles_of(params) * launch.range.k_units;
  launch.range.blocks = std::min(params.blocks > 0 ? params.blocks : num_sms, launch.range.units);
  launch.x_map = make_bf16_tensor_map_swizzle128(params.x, params.num_rows, params.k, kBoxRows);
  launch.w_map = make_bf16_tensor_map_swizzle128(params.weight, params.n, params.k, kBoxRows);
  if (params.num_rows <= 64)
    params.y_fp32 ? launch_with<1, float>(launch, stream) : launch_with<1, __nv_bfloat16>(launch, stream);
  else
    params.y_fp32 ? launch_with<2, float>(launch, stream) : launch_with<2, __nv_bfloat16>(launch, stream);
}

}  // namespace qinfer::cuda
