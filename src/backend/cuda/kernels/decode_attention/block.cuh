// The parts of a decode attention block that do not depend on how K/V tiles reach shared memory, shared by the
// cp.async kernel (cp_async.cu) and the Hopper bulk-tensor-copy kernel (bulk_copy_sm90.cu): the GQA
// group's query fragments, one 64-token tile of scores and P·V on tensor cores with the online softmax, and the end of
// a block (its four warps merged, the result or split partial stored, the splits merged by the last block to arrive).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/geometry.h"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda::decode_block {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float rescale_factor(float old_max, float new_max) {
  return old_max == -INFINITY ? 0.0f : exp2f(old_max - new_max);
}

// Keys per split of a decode sequence of `context` keys: its context spread over all num_splits splits in whole
// tiles, at most the planned tokens_per_split. A batch is planned for its longest context, and a decode graph for its
// power-of-two context bucket, so a sequence just past a bucket's lower half would otherwise leave half the splits,
// and of the GPU, idle.
__device__ __forceinline__ int split_tokens(const DecodeAttentionArgs& p, int context) {
  const int spread = (context + p.num_splits - 1) / p.num_splits;
  return min(p.tokens_per_split, max(kTileTokens, (spread + kTileTokens - 1) / kTileTokens * kTileTokens));
}

// The splits of a decode sequence of `context` keys that hold keys, at least 1. Splits past them (a sequence shorter
// than a tile per split) have nothing to do.
__device__ __forceinline__ int active_splits(const DecodeAttentionArgs& p, int context) {
  const int tokens = split_tokens(p, context);
  return max(1, min(p.num_splits, (context + tokens - 1) / tokens));
}

// What a block works on: grid (num_splits, num_kv_heads, num_decode); keys [begin, end) of the sequence, one of its
// `splits` active splits unless `idle`. An idle block returns at once, before waiting for the previous kernel and
// without writing anything: the merge reads only the active splits, and the launch's other blocks wait (split 0 is
// always active), so the kernel still completes after its predecessor (pdl.cuh).
struct BlockWork {
  int split, kv_head, seq, group, q_row, begin, end, num_tiles, splits;
  const int32_t* table;  // the sequence's block-table row
  __device__ bool idle() const { return split >= splits; }
};

__device__ __forceinline__ BlockWork block_work(const DecodeAttentionArgs& p) {
  BlockWork w;
  w.split = blockIdx.x;
  w.kv_head = blockIdx.y;
  w.seq = blockIdx.z;
  w.group = p.num_heads / p.num_kv_heads;
  w.q_row = p.q_rows[w.seq];
  const int context = p.context_lens[w.seq], tokens = split_tokens(p, context);
  w.begin = w.split * tokens;
  w.end = min(context, w.begin + tokens);
  w.num_tiles = w.begin < w.end ? (w.end - w.begin + kTileTokens - 1) / kTileTokens : 0;
  w.splits = active_splits(p, context);
  w.table = p.block_tables + static_cast<int64_t>(p.table_rows[w.seq]) * p.block_table_stride;
  return w;
}

// The tile of this block that holds its sequence's current token (the last key, context_lens - 1), or -1 when the
// block's split does not hold it. The previous kernel (QK-norm/RoPE) or the block's fused QK-norm/RoPE writes that
// token's K/V, so its tile is copied after the wait; no kernel of the step writes the keys before it, and the block's
// plan comes from the host, so the kernels copy their other first tiles before waiting for the previous kernel.
__device__ __forceinline__ int current_token_tile(const DecodeAttentionArgs& p, const BlockWork& w) {
  const int current = p.context_lens[w.seq] - 1;
  return current >= w.begin && current < w.end ? (current - w.begin) / kTileTokens : -1;
}

// The block's GQA group of query heads: [group][kHeadDim] of its decode token in p.q.
template <int kHeadDim>
__device__ __forceinline__ const __nv_bfloat16* group_query(const DecodeAttentionArgs& p, const BlockWork& w) {
  return p.q + (static_cast<int64_t>(w.q_row) * p.num_heads + w.kv_head * w.group) * kHeadDim;
}

// Vector (page slot) of `key` of this block's KV head in a pool viewed as [num_blocks * num_kv_heads * block_size]
// vectors of head_dim elements (the K/V pools) or of one scale (the fp8 scale pools).
__device__ __forceinline__ int64_t cache_vector(const DecodeAttentionArgs& p, const BlockWork& w, int key) {
  const int64_t page = w.table[key / p.block_size];
  return (page * p.num_kv_heads + w.kv_head) * p.block_size + key % p.block_size;
}

// The register kernels' start: this warp's keys of the block's first tile are loaded before waiting for the previous
// kernel, except the current token (the sequence's last key, context_lens - 1), whose K/V that kernel writes:
// `load(first, limit)` loads the warp's keys first + [0, kWarpKeys) below `limit`, then every thread runs
// `before_wait()` (work on data no kernel of the step writes), after the wait `after_wait()` (the fused QK-norm/RoPE,
// which may write the current token's K/V; it ends with a block barrier), and then `reload(first, current)` loads the
// current token where this warp holds it. Returns the warp's first key.
template <typename Load, typename BeforeWait, typename AfterWait, typename Reload>
__device__ __forceinline__ int load_first_keys_then_wait(const DecodeAttentionArgs& p, const BlockWork& w, int warp,
                                                         Load load, BeforeWait before_wait, AfterWait after_wait,
                                                         Reload reload) {
  const int current = p.context_lens[w.seq] - 1;
  const int first = w.begin + warp * kWarpKeys;
  if (w.num_tiles > 0) load(first, min(w.end, current));
  before_wait();
  wait_for_producer();
  after_wait();
  if (w.num_tiles > 0 && current < w.end && current >= first && current < first + kWarpKeys) reload(first, current);
  return first;
}

// The register kernels' tile loop after load_first_keys_then_wait (which loaded tile 0 and returned the warp's
// `first` key): `load(first)` brings the warp's keys of each later tile, and `attend(first)` runs where the warp has
// keys before w.end.
template <typename Load, typename Attend>
__device__ __forceinline__ void over_warp_keys(const BlockWork& w, int warp, int first, Load load, Attend attend) {
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    if (tile > 0) {
      first = w.begin + tile * kTileTokens + warp * kWarpKeys;
      load(first);
    }
    if (first < w.end) attend(first);
  }
}

// Keys per bulk-copy box of the Hopper kernels (bulk_copy_sm90.cu, fp8_bulk_copy_sm90.cu): block sizes
// are multiples of 16, so a box never crosses a page.
constexpr int kBoxTokens = 16;

// The Hopper kernels' box row of 16-key group `group` of tile `tile`, in the pools viewed as
// [pool_blocks * num_kv_heads * block_size] rows; 0 for a group past the tile's four or at or past `end` (not copied).
// Rows fit int32 (decode_attention_bulk_copy_available).
__device__ __forceinline__ int box_row(const DecodeAttentionArgs& p, const BlockWork& w, int tile, int group) {
  const int token = w.begin + tile * kTileTokens + group * kBoxTokens;
  if (tile >= w.num_tiles || group >= kTileTokens / kBoxTokens || token >= w.end) return 0;
  return static_cast<int>(cache_vector(p, w, token));
}

// One warp's online-softmax state over its keys: rows lane / 4 and lane / 4 + 8 of the m16 group tile.
template <int kHeadDim>
struct WarpState {
  uint32_t q_frag[kHeadDim / 16][4];  // the query tile as m16 x k16 A fragments
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0, 0};
  float o[kHeadDim / 8][4] = {};
};

// The query fragment (m16 x k16 A operand per 16 dims) of the GQA group, from read-only global memory or (kShared)
// the fused RoPE's stage in shared memory: rows are the group's query heads, padding rows are zero. Thread rows:
// lane / 4 and lane / 4 + 8; columns 2 * (lane % 4) (+ 8).
template <int kHeadDim, bool kShared = false>
__device__ __forceinline__ void load_query_fragments(uint32_t (&q_frag)[kHeadDim / 16][4], const __nv_bfloat16* group_q,
                                                     int group, int lane) {
  const int row = lane / 4, column = (lane % 4) * 2;
  const auto pair = [&](int r, int c) -> uint32_t {
    if (r >= group) return 0u;
    const uint32_t* at = reinterpret_cast<const uint32_t*>(group_q + r * kHeadDim + c);
    return kShared ? *at : __ldg(at);
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    q_frag[kk][0] = pair(row, kk * 16 + column);
    q_frag[kk][1] = pair(row + 8, kk * 16 + column);
    q_frag[kk][2] = pair(row, kk * 16 + column + 8);
    q_frag[kk][3] = pair(row + 8, kk * 16 + column + 8);
  }
}

// One warp's scores of 16 keys, first + [0, 16), in the m16n8 accumulator layout: masked at `end` (keys at or past it
// get probability 0), scaled to log2 units, one online-softmax step (rescaling st.o), and the probabilities as the
// bf16 A fragment `a` of the P·V mma.
template <int kHeadDim>
__device__ __forceinline__ void scores_to_probabilities(WarpState<kHeadDim>& st, float (&s)[2][4], int first, int end,
                                                        float scale_log2, int lane, uint32_t (&a)[4]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = first + nb * 8 + (lane % 4) * 2 + (e % 2);
      const float value = key < end ? s[nb][e] * scale_log2 : -INFINITY;
      s[nb][e] = value;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], value);
    }
  online_softmax_step(s, tile_max, st.row_max, st.row_sum, st.o);
  a[0] = pack_bf16(s[0][0], s[0][1]);
  a[1] = pack_bf16(s[0][2], s[0][3]);
  a[2] = pack_bf16(s[1][0], s[1][1]);
  a[3] = pack_bf16(s[1][2], s[1][3]);
}

// This warp's 16 keys of one tile: scores on tensor cores, masked at `end`, one online-softmax step, O += P·V.
// `chunk_offset(row, chunk)` is the element offset of the 16-byte chunk `chunk` of key `row` in a K or V tile (the
// two kernels lay their tiles out differently). Keys at or past `end` get probability zero, and their V rows must
// hold finite values (0 · NaN is NaN).
template <int kHeadDim, typename ChunkOffset>
__device__ __forceinline__ void attend_tile(WarpState<kHeadDim>& st, const __nv_bfloat16* k_tile,
                                            const __nv_bfloat16* v_tile, ChunkOffset chunk_offset, int tile_first,
                                            int end, float scale_log2, int warp, int lane) {
  float s[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t b[4];
    ldmatrix_x4(b, k_tile + chunk_offset(warp * 16 + (lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
    mma_bf16(s[0], st.q_frag[kk], b[0], b[1]);
    mma_bf16(s[1], st.q_frag[kk], b[2], b[3]);
  }
  uint32_t a[4];
  scores_to_probabilities(st, s, tile_first + warp * 16, end, scale_log2, lane, a);
#pragma unroll
  for (int pair = 0; pair < kHeadDim / 16; ++pair) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, v_tile + chunk_offset(warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, pair * 2 + lane / 16));
    mma_bf16(st.o[2 * pair], a, b[0], b[1]);
    mma_bf16(st.o[2 * pair + 1], a, b[2], b[3]);
  }
}

// Merges the first `splits` splits (the active ones) of the query heads [first_head, first_head + group) of one
// sequence: each split's normalised output weighted by 2^(lse - max lse), in one pass over the splits in order, the
// running maximum rescaling what is summed so far. Reads through L2 (__ldcg): other blocks wrote the partials in this
// launch. The loads of kMergeBatch splits are issued before any is used, so a merge waits for one L2 round trip per
// batch, not per split (8 measured against 16: docs/CUDA_DESIGN.md, "Decode attention: the split plan"). Idle splits
// would add weight 0 and a zero output, so leaving them out changes no bit.
template <int kHeadDim>
__device__ void merge_group_splits(const DecodeAttentionArgs& p, int seq, int first_head, int group, int splits) {
  constexpr int kQuads = kHeadDim / 4;
  constexpr int kMergeBatch = 8;
  for (int index = threadIdx.x; index < group * kQuads; index += blockDim.x) {
    const int head = first_head + index / kQuads, d = (index % kQuads) * 4;
    const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
    float m = -INFINITY, sum = 0;
    float4 acc = make_float4(0, 0, 0, 0);
    for (int batch = 0; batch < splits; batch += kMergeBatch) {
      float lse[kMergeBatch];
      float4 part[kMergeBatch];
#pragma unroll
      for (int b = 0; b < kMergeBatch; ++b) {
        const bool valid = batch + b < splits;
        lse[b] = valid ? __ldcg(p.split_lse + first + batch + b) : -INFINITY;
        part[b] = valid ? __ldcg(reinterpret_cast<const float4*>(p.split_out + (first + batch + b) * kHeadDim + d))
                        : make_float4(0, 0, 0, 0);
      }
      float batch_max = m;
#pragma unroll
      for (int b = 0; b < kMergeBatch; ++b) batch_max = fmaxf(batch_max, lse[b]);
      const float r = rescale_factor(m, batch_max);
      sum *= r;
      acc = make_float4(acc.x * r, acc.y * r, acc.z * r, acc.w * r);
#pragma unroll
      for (int b = 0; b < kMergeBatch; ++b) {
        if (batch + b >= splits) break;
        const float w = rescale_factor(lse[b], batch_max);
        sum += w;
        acc.x += w * part[b].x;
        acc.y += w * part[b].y;
        acc.z += w * part[b].z;
        acc.w += w * part[b].w;
      }
      m = batch_max;
    }
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(
        p.out + (static_cast<int64_t>(p.q_rows[seq]) * p.num_heads + head) * kHeadDim + d);
    dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// store_row of finish_block for the kernels whose accumulators hold dims 8 * nb + 2 * (lane % 4) + {0, 1}.
template <int kHeadDim>
__device__ __forceinline__ auto fragment_row_store(const WarpState<kHeadDim>& st, int lane) {
  return [&st, lane](float* row, int r) {
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
      *reinterpret_cast<float2*>(row + nb * 8 + (lane % 4) * 2) = make_float2(st.o[nb][2 * r], st.o[nb][2 * r + 1]);
  };
}

// The end of a block, once no copy into shared memory is pending: the four warps' states merged through `scratch`
// ([kWarps][scratch_rows][kHeadDim] fp32, scratch_rows >= group), the group's output (one split) or split partial
// stored, and, with arrival counters, the splits merged by the last block of this (sequence, KV head) to finish.
// `store_row(row, r)` writes this thread's accumulators of its row r (0: lane / 4, 1: lane / 4 + 8) into `row`, the
// scratch row [kHeadDim]: the kernels place output dims in the accumulators differently.
template <int kHeadDim, typename StoreRow>
__device__ void finish_block(const DecodeAttentionArgs& p, const BlockWork& w, WarpState<kHeadDim>& st, float* scratch,
                             int scratch_rows, int warp, int lane, StoreRow store_row) {
  __syncthreads();  // all warps are done with the tiles: their space becomes the merge scratch
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 1);
    st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 2);
  }
  __shared__ float warp_max[kWarps][kGroupRows], warp_sum[kWarps][kGroupRows];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lane / 4 + r * 8;
    if (row >= w.group) continue;
    if (lane % 4 == 0) {
      warp_max[warp][row] = st.row_max[r];
      warp_sum[warp][row] = st.row_sum[r];
    }
    store_row(scratch + (warp * scratch_rows + row) * kHeadDim, r);
  }
  __syncthreads();
  for (int index = threadIdx.x; index < w.group * kHeadDim; index += kThreads) {
    const int g = index / kHeadDim, d = index % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) m = fmaxf(m, warp_max[v][g]);
    float sum = 0, acc = 0;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) {
      const float a = rescale_factor(warp_max[v][g], m);
      sum += warp_sum[v][g] * a;
      acc += scratch[(v * scratch_rows + g) * kHeadDim + d] * a;
    }
    const int head = w.kv_head * w.group + g;
    const float value = sum > 0 ? acc / sum : 0.0f;
    if (w.splits == 1) {  // the merge of one split would return these bits
      p.out[(static_cast<int64_t>(w.q_row) * p.num_heads + head) * kHeadDim + d] = __float2bfloat16(value);
    } else {
      const int64_t split_index = (static_cast<int64_t>(w.seq) * p.num_heads + head) * p.num_splits + w.split;
      p.split_out[split_index * kHeadDim + d] = value;
      if (d == 0) p.split_lse[split_index] = sum > 0 ? m + log2f(sum) : -INFINITY;
    }
  }
  if (w.splits == 1 || !p.merge_in_kernel) return;

  // Last block of this (sequence, KV head) to finish merges its active splits (threadFenceReduction pattern).
  __shared__ bool merges;
  __threadfence();  // this block's partials are visible device-wide before it counts itself in
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* counter = p.split_counters + static_cast<int64_t>(w.seq) * p.num_kv_heads + w.kv_head;
    merges = atomicAdd(counter, 1u) == static_cast<uint32_t>(w.splits - 1);
    if (merges) atomicExch(counter, 0u);  // ready for the next launch
  }
  __syncthreads();
  if (!merges) return;
  __threadfence();
  merge_group_splits<kHeadDim>(p, w.seq, w.kv_head * w.group, w.group, w.splits);
}

// Launches one of the decode attention kernels, `kernel(params)`, over grid (num_splits, num_kv_heads, num_decode) of
// `p` with `shared_bytes` of dynamic shared memory and the carveout set for as many resident blocks as it allows.
template <typename Params>
void launch_decode_blocks(void (*kernel)(Params), const DecodeAttentionArgs& p, int shared_bytes,
                          const KernelStream& stream, const Params& params) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  launch_dependent(kernel, dim3(p.num_splits, p.num_kv_heads, p.num_decode), kThreads, shared_bytes, stream, params);
}

}  // namespace qinfer::cuda::decode_block
