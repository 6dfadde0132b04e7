#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileTokens = 64;  // keys per shared-memory tile: 16 per warp
constexpr int kGroupRows = 16;   // query heads of a GQA group padded to one m16 tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float rescale_factor(float old_max, float new_max) {
  return old_max == -INFINITY ? 0.0f : exp2f(old_max - new_max);
}

template <int kHeadDim>
constexpr int shared_bytes() {
  // Q tile + two stages of K and V tiles; the final cross-warp merge reuses the K/V area.
  return (kGroupRows + 4 * kTileTokens) * kHeadDim * 2;
}

// grid (num_splits, num_kv_heads, num_decode). The query heads of one GQA group are the rows of an m16 tile, so K and
// V of the group's KV head are read once (cp.async, double-buffered) and multiplied on tensor cores; each warp owns 16
// keys of every 64-key tile and keeps its own online-softmax state, merged through shared memory at the end.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(DecodeAttentionParams p) {
  constexpr int kDimBlocks = kHeadDim / 8;
  constexpr int kChunks = kHeadDim / 8;
  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = p.num_heads / p.num_kv_heads;
  const int context_len = p.context_lens[seq];
  const int begin = split * p.tokens_per_split;
  const int end = min(context_len, begin + p.tokens_per_split);
  const int q_row = p.q_rows[seq];
  const int32_t* table = p.block_tables + static_cast<int64_t>(p.table_rows[seq]) * p.block_table_stride;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  __nv_bfloat16* q_tile = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [kGroupRows][kHeadDim]
  __nv_bfloat16* k_tiles = q_tile + kGroupRows * kHeadDim;               // [2][kTileTokens][kHeadDim]
  __nv_bfloat16* v_tiles = k_tiles + 2 * kTileTokens * kHeadDim;         // [2][kTileTokens][kHeadDim]

  for (int index = threadIdx.x; index < kGroupRows * kChunks; index += kThreads) {
    const int row = index / kChunks, chunk = index % kChunks;
    const bool valid = row < group;
    const __nv_bfloat16* src =
        p.q + (static_cast<int64_t>(q_row) * p.num_heads + kv_head * group + (valid ? row : 0)) * kHeadDim + chunk * 8;
    cp_async_16(q_tile + swizzle<kHeadDim>(row, chunk), src, valid);
  }
  const int num_tiles = begin < end ? (end - begin + kTileTokens - 1) / kTileTokens : 0;
  if (num_tiles > 0)
    load_kv_tiles<kHeadDim, kThreads, kTileTokens>(k_tiles, v_tiles, p.k_cache, p.v_cache, table, begin, end, kv_head,
                                                   p.num_kv_heads, p.block_size);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  uint32_t q_frag[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    ldmatrix_x4(q_frag[kk], q_tile + swizzle<kHeadDim>((lane % 8) + ((lane / 8) % 2) * 8, kk * 2 + lane / 16));

  const float scale_log2 = p.scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  float o[kDimBlocks][4] = {};
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buffer = tile % 2;
    if (tile + 1 < num_tiles)
      load_kv_tiles<kHeadDim, kThreads, kTileTokens>(
          k_tiles + (1 - buffer) * kTileTokens * kHeadDim, v_tiles + (1 - buffer) * kTileTokens * kHeadDim, p.k_cache,
          p.v_cache, table, begin + (tile + 1) * kTileTokens, end, kv_head, p.num_kv_heads, p.block_size);
    cp_async_commit();
    const __nv_bfloat16* k_tile = k_tiles + buffer * kTileTokens * kHeadDim;
    const __nv_bfloat16* v_tile = v_tiles + buffer * kTileTokens * kHeadDim;

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
    cp_async_wait_all();
    __syncthreads();
  }

  // Merge the four warps' states. Thread rows: lane / 4 (+ 8); only rows < group are real query heads.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  float* warp_acc = reinterpret_cast<float*>(k_tiles);  // [kWarps][kGroupRows][kHeadDim]
  __shared__ float warp_max[kWarps][kGroupRows], warp_sum[kWarps][kGroupRows];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lane / 4 + r * 8;
    if (lane % 4 == 0) {
      warp_max[warp][row] = row_max[r];
      warp_sum[warp][row] = row_sum[r];
    }
#pragma unroll
    for (int nb = 0; nb < kDimBlocks; ++nb) {
      float* dst = warp_acc + (warp * kGroupRows + row) * kHeadDim + nb * 8 + (lane % 4) * 2;
      dst[0] = o[nb][2 * r];
      dst[1] = o[nb][2 * r + 1];
    }
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
}

// grid (num_decode, num_heads), head_dim threads: weights each split's normalised output by 2^(lse - max).
__global__ void merge_splits_kernel(DecodeAttentionParams p) {
  const int seq = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
  float m = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, p.split_lse[first + s]);
  float sum = 0, acc = 0;
  for (int s = 0; s < p.num_splits; ++s) {
    const float w = rescale_factor(p.split_lse[first + s], m);
    sum += w;
    acc += w * p.split_out[(first + s) * p.head_dim + d];
  }
  p.out[(static_cast<int64_t>(p.q_rows[seq]) * p.num_heads + head) * p.head_dim + d] =
      __float2bfloat16(sum > 0 ? acc / sum : 0.0f);
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionParams& p, cudaStream_t stream) {
  constexpr int kShared = shared_bytes<kHeadDim>();
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= 4 * kTileTokens * kHeadDim * 2, "merge scratch must fit");
  CUDA_CHECK(
      cudaFuncSetAttribute(decode_attention_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const dim3 grid(p.num_splits, p.num_kv_heads, p.num_decode);
  decode_attention_kernel<kHeadDim><<<grid, kThreads, kShared, stream>>>(p);
}

}  // namespace

void plan_decode_attention_splits(DecodeAttentionParams& p, int max_context_len, int num_sms) {
  // Enough blocks for about four per SM; splits of whole 64-token tiles.
  const int64_t blocks_without_split = static_cast<int64_t>(p.num_decode) * p.num_kv_heads;
  const int64_t wanted_splits = std::max<int64_t>(1, (4 * num_sms + blocks_without_split - 1) / blocks_without_split);
  int tokens = static_cast<int>((max_context_len + wanted_splits - 1) / wanted_splits);
  tokens = std::max(kTileTokens, (tokens + kTileTokens - 1) / kTileTokens * kTileTokens);
  p.tokens_per_split = tokens;
  p.num_splits = std::max(1, (max_context_len + tokens - 1) / tokens);
}

int decode_attention_max_split_rows(int max_decode, int num_sms) { return max_decode + 4 * num_sms; }

void launch_decode_attention(const DecodeAttentionParams& params, cudaStream_t stream) {
  if (params.num_decode == 0) return;
  QINFER_CHECK(params.num_heads % params.num_kv_heads == 0 && params.num_heads / params.num_kv_heads <= kGroupRows &&
               params.tokens_per_split % kTileTokens == 0);
  if (params.head_dim == 128)
    launch_for_head_dim<128>(params, stream);
  else if (params.head_dim == 64)
    launch_for_head_dim<64>(params, stream);
  else
    QINFER_CHECK(false, "head_dim must be 64 or 128");
  CUDA_CHECK_LAUNCH();
  if (params.num_splits > 1) {
    merge_splits_kernel<<<dim3(params.num_decode, params.num_heads), params.head_dim, 0, stream>>>(params);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace qinfer::cuda
