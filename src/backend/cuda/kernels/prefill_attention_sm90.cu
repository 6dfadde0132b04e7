// Hopper (sm_90a) causal prefill attention over the paged KV cache, FlashAttention-3 structure: producer warps (one
// per cache and 64-column slab) copy K/V tiles of 128 keys through the block table (bulk tensor copies into
// 128-byte-swizzled shared memory, three stages, separate mbarrier full/empty pipelines for K and V); two consumer
// warpgroups of 64 query rows each run S = Q·Kᵀ as wgmma with both operands in shared memory, the online softmax in
// registers (exp2), and O += P·V as wgmma with P as the register A operand and V read transposed from shared memory.
// Each consumer overlaps the softmax of tile t with P·V of tile t − 1. docs/CUDA_DESIGN.md, "Prefill attention", has
// the measurements.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/prefill_attention_splits.h"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"
#include "backend/cuda/kernels/tensor_map.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda {

namespace {

constexpr int kWarpgroupThreads = 128;
constexpr int kConsumers = 2;  // consumer warpgroups, 64 query rows each
constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;
constexpr int kBlockM = kConsumers * 64;  // query rows per block
constexpr int kBlockN = 128;              // keys per tile
constexpr int kStages = 3;                // K/V tiles: consumers hold K of t and V of t - 1, the rest are loading

// Shared memory, each tile [slab][rows][64] bf16 starting at a 1024-byte boundary:
// [kStages][K tile, V tile][kBlockN rows], then [kConsumers] Q tiles of 64 rows, then the barriers (KvBarriers).
template <int kHeadDim>
struct SharedLayout {
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kQBytes = 64 * kHeadDim * 2;
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kBarrierOffset = kQOffset + kConsumers * kQBytes;
  static constexpr int kBytes = kBarrierOffset + 4 * kStages * 8 + 1024;  // + slack to align the start to 1024
};

// K and V of a stage have their own barriers: K is released once Q·Kᵀ has read it, a tile period before P·V releases
// V, so the producer refills K slots early instead of waiting for the slower V of the same stage.
struct KvBarriers {
  uint64_t* full_k;   // [kStages]: the K tile has landed (one arrival per producer warp of K + transaction bytes)
  uint64_t* full_v;   // [kStages]: the V tile has landed
  uint64_t* empty_k;  // [kStages]: every consumer warp has finished reading the K tile
  uint64_t* empty_v;  // [kStages]: every consumer warp has finished reading the V tile
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int kHeadDim>
constexpr int kProducerWarps = 2 * (kHeadDim / 64);  // K and V of each 64-column slab
static_assert(kProducerWarps<128> <= kWarpgroupThreads / 32, "the producer warps fit in one warpgroup");
// setmaxnreg moves registers within the block's allocation: __launch_bounds__(kThreads, 1) gives every thread 168 at
// entry (65536 / 384 rounded down to 8), and the consumers' increase waits until the producer's decrease has freed
// enough, forever if the two do not fit in 384 x 168 (a 48-register producer hung every launch).
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kEntryRegisters = 65536 / kThreads / 8 * 8;
static_assert(kWarpgroupThreads * kProducerRegisters + kConsumers * kWarpgroupThreads * kConsumerRegisters <=
                  kThreads * kEntryRegisters,
              "the warpgroups' register counts exceed the block's allocation: setmaxnreg.inc would never return");
constexpr float kLog2e = 1.4426950408889634f;
// Named barrier 1 + consumer: a consumer's Q tile.

// A block's work: query block m_block of head `head` of prefill sequence `seq`, against key tiles
// [first_tile, first_tile + num_tiles) (all the tiles its rows need, or one key split of them).
struct TileRange {
  int head, seq, m_block, split, q_len, q_start, cached, context_len, first_tile, num_tiles;
};

// Producer warps, two per 64-column slab: warp w copies slab w % kSlabs of the K tiles (w < kSlabs) or of the V
// tiles (the others). Tile t goes into stage t % kStages once the consumers released that stage's K (or V) slot. A
// tile whose keys all lie inside the context is copied by the bulk tensor copy engine: one lane issues one box of 16
// rows x 64 columns per 16-token group (the block size is a multiple of 16, so a group lies in one cache block: one
// page lookup, by the lane that copies the group), and full_k / full_v complete when every warp of that cache has
// arrived and the bytes have landed. The page lookups of the next tile are issued before waiting for its slot. Four
// warps (four schedulers) instead of one: one warp issuing all 32 boxes of a tile was busy for most of a tile period,
// and the consumers waited for K at nearly every tile (docs/CUDA_DESIGN.md, "Prefill attention"). The tile that reaches
// past the context (at most one per query block) is copied with cp.async instead, rows past the end zero-filled: V rows
// there must be finite, since P·V multiplies them by the probability 0.
template <int kHeadDim>
__device__ __forceinline__ void produce_kv_tiles(const PrefillAttentionParams& p, const CUtensorMap* k_map,
                                                 const CUtensorMap* v_map, const TileRange& r, unsigned char* stages,
                                                 const KvBarriers& b) {
  using Layout = SharedLayout<kHeadDim>;
  constexpr int kSlabs = kHeadDim / 64;
  constexpr int kGroups = kBlockN / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool copies_v = warp >= kSlabs;
  const int slab = warp % kSlabs;
  const CUtensorMap* map = copies_v ? v_map : k_map;
  const __nv_bfloat16* cache = copies_v ? p.v_cache : p.k_cache;
  uint64_t* full = copies_v ? b.full_v : b.full_k;
  uint64_t* empty = copies_v ? b.empty_v : b.empty_k;
  const uint32_t tiles_address = sm90::shared_address(stages) + (copies_v ? Layout::kTileBytes : 0);
  const int kv_head = r.head / (p.num_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(p.table_rows[r.seq]) * p.block_table_stride;
  const int block_size = p.block_size;
  // Row of the [blocks * kv_heads * block_size, head_dim] cache matrix that holds `token` of this sequence and head.
  const auto cache_row = [&](int token) {
    return (table[token / block_size] * p.num_kv_heads + kv_head) * block_size + token % block_size;
  };
  const auto copied_by_tma = [&](int tile) { return (tile + 1) * kBlockN <= r.context_len; };
  // Lane g < kGroups: the cache row of 16-token group g of the next bulk-copied tile (and the lane that copies it).
  int group_row = 0;
  const auto look_up_row = [&](int tile) {
    if (lane < kGroups) group_row = cache_row(tile * kBlockN + lane * 16);
  };

  const int end_tile = r.first_tile + r.num_tiles;
  if (copied_by_tma(r.first_tile)) look_up_row(r.first_tile);
  for (int i = 0; i < r.num_tiles; ++i) {  // i: the block's own tile count, which picks stage and phase
    const int tile = r.first_tile + i;
    const int stage = i % kStages;
    const uint32_t tile_address = tiles_address + stage * Layout::kStageBytes;  // [slab][kBlockN][64]
    if (i >= kStages) sm90::mbarrier_wait_suspending(&empty[stage], (i / kStages - 1) & 1);
    if (copied_by_tma(tile)) {
      if (lane == 0) sm90::mbarrier_arrive_expect_tx(&full[stage], Layout::kTileBytes / kSlabs);
      __syncwarp();
      if (lane < kGroups)
        sm90::tma_load_2d(tile_address + slab * kBlockN * 128 + lane * 16 * 128, map, slab * 64, group_row,
                          &full[stage]);
      if (tile + 1 < end_tile && copied_by_tma(tile + 1)) look_up_row(tile + 1);
    } else {
#pragma unroll 2  // more unrolling spills in the 40-register producer (head_dim 64)
      for (int index = lane; index < kBlockN * 8; index += 32) {
        const int row = index / 8, column = slab * 64 + (index % 8) * 8;
        const int token = tile * kBlockN + row;
        const bool valid = token < r.context_len;
        const int64_t source = valid ? static_cast<int64_t>(cache_row(token)) * kHeadDim + column : 0;
        sm90::cp_async_16(tile_address + sm90::swizzled_offset(kBlockN, row, column), cache + source, valid);
      }
      cp_async_commit();
      cp_async_wait_all();
      sm90::fence_proxy_async_shared();  // these generic-proxy writes, then read by the tensor cores
      __syncwarp();
      if (lane == 0) sm90::mbarrier_arrive(&full[stage]);
    }
  }
}

// One online-softmax step on a tile of raw scores in the accumulator layout (this thread: rows lane/4 and lane/4 + 8 of
// its warp, columns first_key + 8 * block + 2 * (lane % 4) + {0, 1}): causal mask, row maxima over the 4 lanes of a
// row, probabilities exp2(score * scale_log2 - max * scale_log2) in place, running sums; `correction` is the factor
// for the output accumulated so far.
template <bool kMasked, int kBlocks>
__device__ __forceinline__ void softmax_tile(float (&s)[kBlocks][4], int first_key, const int (&position)[2],
                                             float scale_log2, float (&row_max)[2], float (&row_sum)[2],
                                             float (&correction)[2]) {
  static_assert((kBlocks & (kBlocks - 1)) == 0, "the row maxima are reduced as a tree over the n8 blocks");
  const int lane = threadIdx.x % 32;
  if (kMasked) {
#pragma unroll
    for (int nb = 0; nb < kBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (first_key + nb * 8 + (lane % 4) * 2 + (e % 2) > position[e / 2]) s[nb][e] = -INFINITY;
  }
  // Row maxima as a tree (depth 5 instead of a chain of 32 dependent fmaxf; max is exact, so the same value).
  float block_max[kBlocks][2];
#pragma unroll
  for (int nb = 0; nb < kBlocks; ++nb) {
    block_max[nb][0] = fmaxf(s[nb][0], s[nb][1]);
    block_max[nb][1] = fmaxf(s[nb][2], s[nb][3]);
  }
#pragma unroll
  for (int stride = 1; stride < kBlocks; stride *= 2)
#pragma unroll
    for (int nb = 0; nb + stride < kBlocks; nb += 2 * stride)
#pragma unroll
      for (int i = 0; i < 2; ++i) block_max[nb][i] = fmaxf(block_max[nb][i], block_max[nb + stride][i]);
  float tile_max[2] = {block_max[0][0], block_max[0][1]};
  float max_scaled[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
    const float new_max = fmaxf(row_max[i], tile_max[i]);
    max_scaled[i] = new_max == -INFINITY ? 0.0f : new_max * scale_log2;
    correction[i] = sm90::fast_exp2(row_max[i] * scale_log2 - max_scaled[i]);  // 0 while row_max is -inf
    row_max[i] = new_max;
    row_sum[i] *= correction[i];
  }
#pragma unroll
  for (int nb = 0; nb < kBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nb][e] = sm90::fast_exp2(fmaf(s[nb][e], scale_log2, -max_scaled[e / 2]));
      row_sum[e / 2] += s[nb][e];
    }
}

// With key splits: this thread's two rows of the split's partial output, normalised, and their log2-sum-exps (-inf
// where no key of the split precedes the row) into split r.split's rows of split_out / split_lse.
template <int kHeadDim>
__device__ __forceinline__ void store_split_rows(const PrefillAttentionParams& p, const TileRange& r,
                                                 const float (&o)[kHeadDim / 8][4], float (&row_sum)[2],
                                                 const float (&row_max)[2], float scale_log2, int first_row) {
  const int lane = threadIdx.x % 32;
  reduce_row_sums(row_sum);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q_index = first_row + i * 8;
    if (q_index >= r.q_len) continue;
    const int64_t row = (static_cast<int64_t>(r.split) * p.num_tokens + r.q_start + q_index) * p.num_heads + r.head;
    const bool any = row_sum[i] > 0;
    if (lane % 4 == 0) p.split_lse[row] = any ? row_max[i] * scale_log2 + __log2f(row_sum[i]) : -INFINITY;
    const float inv_sum = any ? 1.0f / row_sum[i] : 0.0f;
    float* dst = p.split_out + row * kHeadDim;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
      *reinterpret_cast<float2*>(dst + nb * 8 + (lane % 4) * 2) =
          make_float2(o[nb][2 * i] * inv_sum, o[nb][2 * i + 1] * inv_sum);
  }
}

// A key split with no tile for its query block (a split past the block's last key): its rows' lse are -inf, so the
// merge skips them.
__device__ __forceinline__ void store_empty_split_rows(const PrefillAttentionParams& p, const TileRange& r) {
  const int rows = min(kBlockM, r.q_len - r.m_block * kBlockM);
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const int64_t token = r.q_start + r.m_block * kBlockM + i;
    p.split_lse[(static_cast<int64_t>(r.split) * p.num_tokens + token) * p.num_heads + r.head] = -INFINITY;
  }
}

// Consumer warpgroup `consumer`: query rows [64 * consumer, 64 * consumer + 64) of the block.
template <int kHeadDim>
__device__ __forceinline__ void consume_kv_tiles(const PrefillAttentionParams& p, const TileRange& r, int consumer,
                                                 unsigned char* shared, const KvBarriers& b) {
  using Layout = SharedLayout<kHeadDim>;
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kDimBlocks = kHeadDim / 8;  // n8 blocks of the output
  const int thread = threadIdx.x % kWarpgroupThreads, warp = thread / 32, lane = thread % 32;
  const int first_q = r.m_block * kBlockM + consumer * 64;

  unsigned char* q_tile = shared + Layout::kQOffset + consumer * Layout::kQBytes;  // [slab][64][64]
  for (int index = thread; index < 64 * kChunks; index += kWarpgroupThreads) {
    const int row = index / kChunks, column = (index % kChunks) * 8;
    const int q_index = first_q + row;
    const bool valid = q_index < r.q_len;
    const __nv_bfloat16* source =
        p.q + (static_cast<int64_t>(r.q_start + (valid ? q_index : 0)) * p.num_heads + r.head) * kHeadDim + column;
    cp_async_16(q_tile + sm90::swizzled_offset(64, row, column), source, valid);
  }
  cp_async_commit();
  cp_async_wait_all();
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(1 + consumer, kWarpgroupThreads);

  // This thread's rows: warp * 16 + lane / 4 and 8 further (the accumulator layout).
  const int row_base = warp * 16 + lane / 4;
  const int position[2] = {r.cached + first_q + row_base, r.cached + first_q + row_base + 8};
  const int first_position = r.cached + first_q;  // tiles entirely at or before it need no causal mask
  const float scale_log2 = p.scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  float o[kDimBlocks][4] = {};
  const uint32_t q_address = sm90::shared_address(q_tile);
  // Tiles are counted from the block's first (i = tile - r.first_tile), which picks their stage and phase.
  const auto k_address = [&](int i) { return sm90::shared_address(shared + (i % kStages) * Layout::kStageBytes); };
  // S [64 x kBlockN] = Q Kᵀ for a tile, 16 dimensions per instruction: slab kk / 4, 32 bytes further per step in it.
  float s[kBlockN / 8][4];
  // The producer's writers fenced their generic-proxy writes (if any) before the barriers completed.
  const auto wait_for = [&](uint64_t* full, int i) {
    sm90::mbarrier_wait_suspending(&full[i % kStages], (i / kStages) & 1);
  };
  // One arrival per warp: wgmma.wait_group is warp-synchronous, so the whole warp is past its reads of the slot.
  const auto release = [&](uint64_t* empty, int i) {
    if (lane == 0) sm90::mbarrier_arrive(&empty[i % kStages]);
  };
  // Descriptors are built once per tile and advanced by constant offsets (advance_descriptor).
  const uint64_t q_descriptor = sm90::swizzled_descriptor(q_address, 16);
  const auto issue_scores = [&](int i) {
    const uint64_t k_descriptor = sm90::swizzled_descriptor(k_address(i), 16);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t step = (kk % 4) * 32;
      sm90::wgmma_m64n128k16_ss(s, sm90::advance_descriptor(q_descriptor, (kk / 4) * 64 * 128 + step),
                                sm90::advance_descriptor(k_descriptor, (kk / 4) * kBlockN * 128 + step), kk == 0);
    }
    sm90::wgmma_commit();
  };
  // O += P V for a tile, 16 keys per instruction: P's accumulator blocks 2kk, 2kk + 1 are the A fragment of step kk.
  uint32_t p_frag[kBlockN / 16][4];
  const auto issue_values = [&](int i) {
    const uint64_t v_descriptor = sm90::swizzled_descriptor(k_address(i) + Layout::kTileBytes, kBlockN * 128);
    sm90::wgmma_fence_operands(o);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t step_descriptor = sm90::advance_descriptor(v_descriptor, kk * 16 * 128);
      if constexpr (kHeadDim == 128)
        sm90::wgmma_m64n128k16_rs_mn_major_b(o, p_frag[kk], step_descriptor);
      else
        sm90::wgmma_m64n64k16_rs_mn_major_b(o, p_frag[kk], step_descriptor);
    }
    sm90::wgmma_commit();
  };
  // The causal mask is needed only on tiles that reach past the first row's position.
  const auto softmax = [&](bool needs_mask, int first_key, float(&correction)[2]) {
    if (needs_mask)
      softmax_tile<true>(s, first_key, position, scale_log2, row_max, row_sum, correction);
    else
      softmax_tile<false>(s, first_key, position, scale_log2, row_max, row_sum, correction);
  };
  const auto pack_probabilities = [&] {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      p_frag[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      p_frag[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      p_frag[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      p_frag[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  };

  // The two consumer warpgroups issue their wgmma batches independently: ping-pong turns (named barriers ordering
  // the batches, FlashAttention-3) measured 1-2 % slower at 8 K and 32 K (docs/CUDA_DESIGN.md, "Tried and closed").
  // The scores of tile t + 1 and the P·V product of tile t run on the tensor cores while this warpgroup computes
  // the softmax of tile t + 1; O is rescaled once P·V of tile t has landed.
  float correction[2];
  const auto needs_mask = [&](int tile) { return (tile + 1) * kBlockN - 1 > first_position; };
  wait_for(b.full_k, 0);
  issue_scores(0);
  sm90::wgmma_wait<0>();
  sm90::wgmma_fence_operands(s);
  release(b.empty_k, 0);
  softmax(needs_mask(r.first_tile), r.first_tile * kBlockN, correction);
  pack_probabilities();
  for (int i = 1; i < r.num_tiles; ++i) {
    const int tile = r.first_tile + i;
    wait_for(b.full_k, i);
    wait_for(b.full_v, i - 1);
    issue_scores(i);
    issue_values(i - 1);
    sm90::wgmma_wait<1>();
    sm90::wgmma_fence_operands(s);
    release(b.empty_k, i);
    softmax(needs_mask(tile), tile * kBlockN, correction);
    sm90::wgmma_wait<0>();
    sm90::wgmma_fence_operands(o);
    sm90::wgmma_fence_operands(p_frag);
    release(b.empty_v, i - 1);
    // Once the row maxima settle, whole warps see corrections of exactly 1 and skip the rescale.
    if (__any_sync(0xffffffffu, correction[0] != 1.0f || correction[1] != 1.0f)) {
#pragma unroll
      for (int nb = 0; nb < kDimBlocks; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nb][e] *= correction[e / 2];
    }
    pack_probabilities();
  }
  wait_for(b.full_v, r.num_tiles - 1);
  issue_values(r.num_tiles - 1);
  sm90::wgmma_wait<0>();
  sm90::wgmma_fence_operands(o);
  release(b.empty_v, r.num_tiles - 1);

  if (p.kv_splits == 1)
    store_attention_rows<kHeadDim>(o, row_sum, p.out, p.num_heads, r.head, r.q_start, r.q_len, first_q + row_base);
  else
    store_split_rows<kHeadDim>(p, r, o, row_sum, row_max, scale_log2, first_q + row_base);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (num_heads, num_prefill, ceil(max_q_len / kBlockM) * kv_splits): the heaviest (last) query blocks of all heads
// first; z = query block (from the last) * kv_splits + key split.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention_wgmma_kernel(const PrefillAttentionParams p, const __grid_constant__ CUtensorMap k_map,
                                   const __grid_constant__ CUtensorMap v_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Layout = SharedLayout<kHeadDim>;
  TileRange r;
  r.head = blockIdx.x;
  r.seq = blockIdx.y;
  r.m_block = gridDim.z / p.kv_splits - 1 - blockIdx.z / p.kv_splits;
  r.split = blockIdx.z % p.kv_splits;
  r.q_len = p.q_lens[r.seq];
  if (r.m_block * kBlockM >= r.q_len) return;
  r.q_start = p.q_starts[r.seq];
  r.cached = p.cached_lens[r.seq];
  r.context_len = r.cached + r.q_len;
  const int last_position = r.cached + min(r.q_len, (r.m_block + 1) * kBlockM) - 1;  // keys up to it are needed
  const int all_tiles = last_position / kBlockN + 1;
  const int split_tiles = (all_tiles + p.kv_splits - 1) / p.kv_splits;
  r.first_tile = r.split * split_tiles;
  r.num_tiles = min(all_tiles - r.first_tile, split_tiles);
  if (r.num_tiles <= 0) {
    store_empty_split_rows(p, r);
    return;
  }

  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (sm90::shared_address(shared_raw) & 1023)) & 1023);
  uint64_t* barriers = reinterpret_cast<uint64_t*>(shared + Layout::kBarrierOffset);
  const KvBarriers b{barriers, barriers + kStages, barriers + 2 * kStages, barriers + 3 * kStages};
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&b.full_k[stage], kHeadDim / 64);  // one arrival per producer warp of the cache
      sm90::mbarrier_init(&b.full_v[stage], kHeadDim / 64);
      sm90::mbarrier_init(&b.empty_k[stage], kConsumers * kWarpgroupThreads / 32);
      sm90::mbarrier_init(&b.empty_v[stage], kConsumers * kWarpgroupThreads / 32);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x < 32 * kProducerWarps<kHeadDim>) produce_kv_tiles<kHeadDim>(p, &k_map, &v_map, r, shared, b);
  } else {
    sm90::setmaxnreg_inc<kConsumerRegisters>();
    consume_kv_tiles<kHeadDim>(p, r, warpgroup - 1, shared, b);
  }
#else
  (void)p, (void)k_map, (void)v_map;
#endif
}

template <int kHeadDim>
void launch_for_head_dim(const PrefillAttentionParams& p, const KernelStream& stream) {
  constexpr int kSharedBytes = SharedLayout<kHeadDim>::kBytes;
  CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_wgmma_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kSharedBytes));
  const dim3 grid(p.num_heads, p.num_prefill, (p.max_q_len + kBlockM - 1) / kBlockM * p.kv_splits);
  // The caches as [blocks * kv_heads * block_size, head_dim] matrices, copied in boxes of 16 rows.
  const int64_t cache_rows = p.pool_blocks * p.num_kv_heads * p.block_size;
  const CUtensorMap k_map = make_bf16_tensor_map_swizzle128(p.k_cache, cache_rows, kHeadDim, 16);
  const CUtensorMap v_map = make_bf16_tensor_map_swizzle128(p.v_cache, cache_rows, kHeadDim, 16);
  prefill_attention_wgmma_kernel<kHeadDim><<<grid, kThreads, kSharedBytes, stream.stream>>>(p, k_map, v_map);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool prefill_attention_wgmma_available(const DeviceCapabilities& device) { return device.hopper_kernels; }

void launch_prefill_attention_wgmma(const PrefillAttentionParams& params, const KernelStream& stream) {
  QINFER_CHECK(prefill_attention_wgmma_available(stream.device),
               "the wgmma prefill attention needs the sm_90a kernels on a compute 9.0 device");
  if (params.num_prefill == 0 || params.max_q_len == 0) return;
  QINFER_CHECK(params.num_kv_heads > 0 && params.num_heads % params.num_kv_heads == 0);
  QINFER_CHECK(params.block_size > 0 && params.block_size % 16 == 0,
               "the wgmma kernel needs a block size that is a multiple of 16");
  QINFER_CHECK(params.pool_blocks > 0, "the wgmma kernel needs the cache's block count (its tensor maps)");
  PrefillAttentionParams p = params;
  p.kv_splits = prefill_attention_kv_splits(params, stream.device.num_sms);
  with_head_dim(p.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(p, stream); });
  if (p.kv_splits > 1) launch_merge_prefill_attention_splits(p, stream.stream);
}

}  // namespace qinfer::cuda
