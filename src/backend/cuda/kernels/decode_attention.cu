#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileTokens = 64;  // keys per shared-memory tile: 16 per warp
constexpr int kStages = 3;       // K/V tiles in shared memory: the one computed and two in flight
constexpr int kGroupRows = 16;   // query heads of a GQA group padded to one m16 tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float rescale_factor(float old_max, float new_max) {
  return old_max == -INFINITY ? 0.0f : exp2f(old_max - new_max);
}

template <int kHeadDim>
constexpr int shared_bytes() {
  return kStages * 2 * kTileTokens * kHeadDim * 2;  // [kStages][K|V][kTileTokens][kHeadDim] bf16
}

// Blocks of the attention kernel resident on one SM, from shared memory alone (228 KB per SM on Hopper, 1 KB of it
// reserved per block; registers and threads allow more). Only steers the split plan, so an estimate suffices.
template <int kHeadDim>
constexpr int resident_blocks_per_sm() {
  constexpr int kStaticShared = 2 * kWarps * kGroupRows * 4 + 16;
  return std::min(16, (228 * 1024) / (shared_bytes<kHeadDim>() + kStaticShared + 1024));
}

// The query fragment (m16 x k16 A operand per 16 dims) of the GQA group, straight from global memory: rows are the
// group's query heads, padding rows are zero. Thread rows: lane / 4 and lane / 4 + 8; columns 2 * (lane % 4) (+ 8).
template <int kHeadDim>
__device__ __forceinline__ void load_query_fragments(uint32_t (&q_frag)[kHeadDim / 16][4], const __nv_bfloat16* group_q,
                                                     int group, int lane) {
  const int row = lane / 4, column = (lane % 4) * 2;
  const auto pair = [&](int r, int c) -> uint32_t {
    return r < group ? __ldg(reinterpret_cast<const uint32_t*>(group_q + r * kHeadDim + c)) : 0u;
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    q_frag[kk][0] = pair(row, kk * 16 + column);
    q_frag[kk][1] = pair(row + 8, kk * 16 + column);
    q_frag[kk][2] = pair(row, kk * 16 + column + 8);
    q_frag[kk][3] = pair(row + 8, kk * 16 + column + 8);
  }
}

// Merges the splits of the query heads [first_head, first_head + group) of one sequence: each split's normalised
// output weighted by 2^(lse - max lse). Reads through L2 (__ldcg): other blocks wrote the partials in this launch.
template <int kHeadDim>
__device__ void merge_group_splits(const DecodeAttentionParams& p, int seq, int first_head, int group) {
  constexpr int kQuads = kHeadDim / 4;
  for (int index = threadIdx.x; index < group * kQuads; index += blockDim.x) {
    const int head = first_head + index / kQuads, d = (index % kQuads) * 4;
    const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
    float m = -INFINITY;
    for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, __ldcg(p.split_lse + first + s));
    float sum = 0;
    float4 acc = make_float4(0, 0, 0, 0);
    for (int s = 0; s < p.num_splits; ++s) {
      const float w = rescale_factor(__ldcg(p.split_lse + first + s), m);
      const float4 part = __ldcg(reinterpret_cast<const float4*>(p.split_out + (first + s) * kHeadDim + d));
      sum += w;
      acc.x += w * part.x;
      acc.y += w * part.y;
      acc.z += w * part.z;
      acc.w += w * part.w;
    }
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(
        p.out + (static_cast<int64_t>(p.q_rows[seq]) * p.num_heads + head) * kHeadDim + d);
    dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// grid (num_splits, num_kv_heads, num_decode). The query heads of one GQA group are the rows of an m16 tile, so K and
// V of the group's KV head are read once and multiplied on tensor cores. 64-token K/V tiles stream through a
// kStages-deep cp.async ring (two tiles in flight while one is computed, one barrier per tile); each warp owns 16 keys
// of every tile and keeps its own online-softmax state, merged through shared memory at the end.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 2) decode_attention_kernel(DecodeAttentionParams p) {
  constexpr int kDimBlocks = kHeadDim / 8;
  constexpr int kTileElements = kTileTokens * kHeadDim;
  allow_dependents();
  wait_for_producer();
  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = p.num_heads / p.num_kv_heads;
  const int context_len = p.context_lens[seq];
  const int begin = split * p.tokens_per_split;
  const int end = min(context_len, begin + p.tokens_per_split);
  const int q_row = p.q_rows[seq];
  const int32_t* table = p.block_tables + static_cast<int64_t>(p.table_rows[seq]) * p.block_table_stride;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  __nv_bfloat16* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [kStages][K|V][kTileTokens][kHeadDim]
  const auto k_stage = [&](int tile) { return tiles + (tile % kStages) * 2 * kTileElements; };

  // Prologue: the first kStages - 1 tiles, one cp.async group each (empty groups keep the count uniform).
  const int num_tiles = begin < end ? (end - begin + kTileTokens - 1) / kTileTokens : 0;
#pragma unroll
  for (int tile = 0; tile < kStages - 1; ++tile) {
    if (tile < num_tiles)
      load_kv_tiles<kHeadDim, kThreads, kTileTokens>(k_stage(tile), k_stage(tile) + kTileElements, p.k_cache, p.v_cache,
                                                     table, begin + tile * kTileTokens, end, kv_head, p.num_kv_heads,
                                                     p.block_size);
    cp_async_commit();
  }
  uint32_t q_frag[kHeadDim / 16][4];
  load_query_fragments<kHeadDim>(q_frag, p.q + (static_cast<int64_t>(q_row) * p.num_heads + kv_head * group) * kHeadDim,
                                 group, lane);

  const float scale_log2 = p.scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  float o[kDimBlocks][4] = {};
  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait_group<kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                     // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kStages - 1;
    if (next < num_tiles)
      load_kv_tiles<kHeadDim, kThreads, kTileTokens>(k_stage(next), k_stage(next) + kTileElements, p.k_cache, p.v_cache,
                                                     table, begin + next * kTileTokens, end, kv_head, p.num_kv_heads,
                                                     p.block_size);
    cp_async_commit();
    const __nv_bfloat16* k_tile = k_stage(tile);
    const __nv_bfloat16* v_tile = k_tile + kTileElements;

    // Scores of this warp's 16 keys: two n-blocks of 8.
    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, k_tile + swizzle<kHeadDim>(warp * 16 + (lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
      mma_bf16(s[0], q_frag[kk], b[0], b[1]);
      mma_bf16(s[1], q_frag[kk], b[2], b[3]);
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = begin + tile * kTileTokens + warp * 16 + nb * 8 + (lane % 4) * 2 + (e % 2);
        const float value = key < end ? s[nb][e] * scale_log2 : -INFINITY;
        s[nb][e] = value;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], value);
      }
    online_softmax_step(s, tile_max, row_max, row_sum, o);
    const uint32_t a[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                           pack_bf16(s[1][2], s[1][3])};
#pragma unroll
    for (int pair = 0; pair < kHeadDim / 16; ++pair) {
      uint32_t b[4];
      ldmatrix_x4_trans(
          b, v_tile + swizzle<kHeadDim>(warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, pair * 2 + lane / 16));
      mma_bf16(o[2 * pair], a, b[0], b[1]);
      mma_bf16(o[2 * pair + 1], a, b[2], b[3]);
    }
  }
  cp_async_wait_all();
  __syncthreads();  // all warps are done with the tiles: their space becomes the merge scratch

  // Merge the four warps' states. Thread rows: lane / 4 (+ 8); only rows < group are real query heads.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  float* warp_acc = reinterpret_cast<float*>(tiles);  // [kWarps][kGroupRows][kHeadDim]
  __shared__ float warp_max[kWarps][kGroupRows], warp_sum[kWarps][kGroupRows];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lane / 4 + r * 8;
    if (row >= group) continue;
    if (lane % 4 == 0) {
      warp_max[warp][row] = row_max[r];
      warp_sum[warp][row] = row_sum[r];
    }
#pragma unroll
    for (int nb = 0; nb < kDimBlocks; ++nb)
      *reinterpret_cast<float2*>(warp_acc + (warp * kGroupRows + row) * kHeadDim + nb * 8 + (lane % 4) * 2) =
          make_float2(o[nb][2 * r], o[nb][2 * r + 1]);
  }
  __syncthreads();
  for (int index = threadIdx.x; index < group * kHeadDim; index += kThreads) {
    const int g = index / kHeadDim, d = index % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_max[w][g]);
    float sum = 0, acc = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float a = rescale_factor(warp_max[w][g], m);
      sum += warp_sum[w][g] * a;
      acc += warp_acc[(w * kGroupRows + g) * kHeadDim + d] * a;
    }
    const int head = kv_head * group + g;
    const float value = sum > 0 ? acc / sum : 0.0f;
    if (p.num_splits == 1) {
      p.out[(static_cast<int64_t>(q_row) * p.num_heads + head) * kHeadDim + d] = __float2bfloat16(value);
    } else {
      const int64_t split_index = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits + split;
      p.split_out[split_index * kHeadDim + d] = value;
      if (d == 0) p.split_lse[split_index] = sum > 0 ? m + log2f(sum) : -INFINITY;
    }
  }
  if (p.num_splits == 1 || p.split_counters == nullptr) return;

  // Last block of this (sequence, KV head) to finish merges all splits (threadFenceReduction pattern).
  __shared__ bool merges;
  __threadfence();  // this block's partials are visible device-wide before it counts itself in
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* counter = p.split_counters + static_cast<int64_t>(seq) * p.num_kv_heads + kv_head;
    merges = atomicAdd(counter, 1u) == static_cast<uint32_t>(p.num_splits - 1);
    if (merges) atomicExch(counter, 0u);  // ready for the next launch
  }
  __syncthreads();
  if (!merges) return;
  __threadfence();
  merge_group_splits<kHeadDim>(p, seq, kv_head * group, group);
}

// grid (num_kv_heads, num_decode): merges the splits of one GQA group when no arrival counters are given.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) merge_splits_kernel(DecodeAttentionParams p) {
  allow_dependents();
  wait_for_producer();
  const int group = p.num_heads / p.num_kv_heads;
  merge_group_splits<kHeadDim>(p, blockIdx.y, blockIdx.x * group, group);
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionParams& p, cudaStream_t stream) {
  constexpr int kShared = shared_bytes<kHeadDim>();
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= kShared, "merge scratch must fit");
  CUDA_CHECK(
      cudaFuncSetAttribute(decode_attention_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<kHeadDim>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared));
  const dim3 grid(p.num_splits, p.num_kv_heads, p.num_decode);
  launch_dependent(decode_attention_kernel<kHeadDim>, grid, kThreads, kShared, stream, p);
  if (p.num_splits > 1 && p.split_counters == nullptr)
    launch_dependent(merge_splits_kernel<kHeadDim>, dim3(p.num_kv_heads, p.num_decode), kThreads, 0, stream, p);
}

// Estimated cost of a plan in tiles per resident slot: full or partial waves of blocks times (tiles per block plus
// about two tiles' worth of pipeline fill and merge per block).
int64_t plan_cost(int64_t blocks, int64_t capacity, int64_t tiles_per_block) {
  constexpr int64_t kBlockOverheadTiles = 2;
  return (blocks + capacity - 1) / capacity * (tiles_per_block + kBlockOverheadTiles);
}

}  // namespace

void plan_decode_attention_splits(DecodeAttentionParams& p, int max_context_len, int num_sms) {
  const int64_t pairs = static_cast<int64_t>(p.num_decode) * p.num_kv_heads;
  const int64_t capacity =
      static_cast<int64_t>(num_sms) * (p.head_dim == 64 ? resident_blocks_per_sm<64>() : resident_blocks_per_sm<128>());
  const int64_t tiles = std::max<int64_t>(1, (max_context_len + kTileTokens - 1) / kTileTokens);
  // num_decode * num_splits stays within decode_attention_max_split_rows.
  const int64_t max_splits =
      std::min<int64_t>(tiles, (static_cast<int64_t>(p.num_decode) + 4 * num_sms) / std::max(1, p.num_decode));
  int64_t best_tiles = tiles, best_cost = std::numeric_limits<int64_t>::max();
  for (int64_t splits = 1; splits <= max_splits; ++splits) {
    const int64_t tiles_per_split = (tiles + splits - 1) / splits;
    const int64_t cost =
        plan_cost(pairs * ((tiles + tiles_per_split - 1) / tiles_per_split), capacity, tiles_per_split);
    if (cost < best_cost) {
      best_cost = cost;
      best_tiles = tiles_per_split;
    }
  }
  p.tokens_per_split = static_cast<int>(best_tiles * kTileTokens);
  p.num_splits = static_cast<int>((tiles + best_tiles - 1) / best_tiles);
}

int decode_attention_max_split_rows(int max_decode, int num_sms) { return max_decode + 4 * num_sms; }

void launch_decode_attention(const DecodeAttentionParams& params, cudaStream_t stream) {
  if (params.num_decode == 0) return;
  QINFER_CHECK(params.num_heads % params.num_kv_heads == 0 && params.num_heads / params.num_kv_heads <= kGroupRows &&
               params.tokens_per_split % kTileTokens == 0);
  with_head_dim(params.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(params, stream); });
}

}  // namespace qinfer::cuda
