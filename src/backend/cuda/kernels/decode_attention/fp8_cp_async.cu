// Decode attention over the fp8 KV cache: cp_async.cu's blocks (split-KV, GQA group on tensor cores, in-kernel
// merge) reading E4M3 tiles and their scales, half the bytes of bf16, through a cp.async ring. Each warp builds its
// tensor-core fragments straight from the ring's bytes with its 16 keys as the m16 rows of the products
// (fp8_fragments.cuh), so a head_dim 128 block needs 49.5 KB of shared memory and four blocks (16
// warps) share a Hopper SM. The pages of a tile's rows are looked up one iteration before its copies start, by a
// cursor stepped from tile to tile (no division per row). docs/CUDA_DESIGN.md, "Decode attention: the family", says
// why and what it reaches.
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_fragments.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// The block-table position of a tile's first token: its block's index in the sequence's table row and its slot in
// that block (a multiple of 16: tiles start at multiples of 64, block sizes are multiples of 16). Stepped from tile to
// tile without a division.
struct TileCursor {
  int block, slot;
};

// The position 16 tokens on from `at` (slots are multiples of 16, and so are block sizes).
__device__ __forceinline__ TileCursor next_group(TileCursor at, int block_size) {
  at.slot += 16;
  if (at.slot == block_size) {
    at.slot = 0;
    ++at.block;
  }
  return at;
}

// The pages and slots of this thread's copy rows of one tile, looked up ahead of the copies (page -1: the row is at or
// past `end`). Data rows: threadIdx.x / kChunks + pass * kRowsPerPass; threads [0, 32) also copy one 16-byte chunk of
// 4 scales.
template <int kHeadDim>
struct TilePages {
  static constexpr int kChunks = kHeadDim / 16;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kPasses = kTileTokens / kRowsPerPass;
  int32_t page[kPasses], slot[kPasses];
  int32_t scale_page, scale_slot;
};

// Row (within the tile) of the 4 scales that thread `thread` < 32 copies: threads [0, 16) K, [16, 32) V.
__device__ __forceinline__ int scale_row(int thread) { return (thread % (kTileTokens / 4)) * 4; }

template <int kHeadDim>
__device__ __forceinline__ TilePages<kHeadDim> look_up_pages(const BlockWork& w, TileCursor tile, int first,
                                                             int block_size) {
  using Pages = TilePages<kHeadDim>;
  __builtin_assume(threadIdx.x < kThreads);  // lets a row's group fold to a constant where the pass decides it
  const auto look_up = [&](int row, int32_t& page, int32_t& slot) {
    TileCursor at = tile;
#pragma unroll
    for (int group = 1; group < kTileTokens / 16; ++group)
      if (group <= row / 16) at = next_group(at, block_size);
    page = first + row < w.end ? __ldg(w.table + at.block) : -1;
    slot = at.slot + row % 16;
  };
  Pages pages;
#pragma unroll
  for (int pass = 0; pass < Pages::kPasses; ++pass)
    look_up(threadIdx.x / Pages::kChunks + pass * Pages::kRowsPerPass, pages.page[pass], pages.slot[pass]);
  pages.scale_page = -1;
  pages.scale_slot = 0;
  if (threadIdx.x < 2 * kTileTokens / 4) look_up(scale_row(threadIdx.x), pages.scale_page, pages.scale_slot);
  return pages;
}

// Where a block's copies read: cache vector (page, slot) of its KV head is page * page_vectors + head_vector + slot.
struct CacheVectors {
  int page_vectors, head_vector;
  __device__ int64_t operator()(int32_t page, int32_t slot) const {
    return static_cast<int64_t>(page) * page_vectors + head_vector + slot;
  }
};

// Starts the copies of one tile from pages looked up before: fp8 rows of K and V into swizzled chunks
// (fp8_chunk_offset; rows past `end` zero-filled) and their scales (4 per 16-byte chunk, which never crosses a page:
// block sizes are multiples of 16; zero-filled past `end`, stale within a chunk that `end` cuts).
template <int kHeadDim>
__device__ __forceinline__ void load_tile(uint8_t* k_tile, uint8_t* v_tile, float* k_scales, float* v_scales,
                                          const DecodeAttentionArgs& p, CacheVectors vectors,
                                          const TilePages<kHeadDim>& pages) {
  using Pages = TilePages<kHeadDim>;
  const int chunk = threadIdx.x % Pages::kChunks;
#pragma unroll
  for (int pass = 0; pass < Pages::kPasses; ++pass) {
    const int row = threadIdx.x / Pages::kChunks + pass * Pages::kRowsPerPass;
    const bool valid = pages.page[pass] >= 0;
    const int64_t offset = valid ? vectors(pages.page[pass], pages.slot[pass]) * kHeadDim + chunk * 16 : 0;
    cp_async_16(k_tile + fp8_chunk_offset<kHeadDim>(row, chunk), p.k_fp8 + offset, valid);
    cp_async_16(v_tile + fp8_chunk_offset<kHeadDim>(row, chunk), p.v_fp8 + offset, valid);
  }
  if (threadIdx.x < 2 * kTileTokens / 4) {
    const bool is_v = threadIdx.x >= kTileTokens / 4, valid = pages.scale_page >= 0;
    const int64_t offset = valid ? vectors(pages.scale_page, pages.scale_slot) : 0;
    cp_async_16((is_v ? v_scales : k_scales) + scale_row(threadIdx.x), (is_v ? p.v_scales : p.k_scales) + offset,
                valid);
  }
}

// grid (num_splits, num_kv_heads, num_decode), as cp_async.cu's decode_attention_kernel; one barrier per tile.
// kHeadBlocks: n8 blocks of query heads (fp8_head_blocks of the GQA group).
template <int kHeadDim, int kHeadBlocks>
__global__ void __launch_bounds__(kThreads, Fp8Layout<kHeadDim>::kBlocksPerSm)
    decode_attention_fp8_kernel(DecodeAttentionArgs p) {
  using Layout = Fp8Layout<kHeadDim>;
  allow_dependents();
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool fused = p.fuse_rope;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  uint8_t* ring = shared_raw;
  float* scale_ring = reinterpret_cast<float*>(shared_raw + Layout::kRingBytes);
  // With the fused RoPE: the group's query heads [group][kHeadDim] bf16 after the rings.
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(shared_raw + Layout::kSharedBytes);
  const auto k_stage = [&](int tile) { return ring + (tile % kFp8Stages) * 2 * Layout::kTileBytes; };
  const auto k_scale_stage = [&](int tile) { return scale_ring + (tile % kFp8Stages) * 2 * kTileTokens; };
  const auto tile_first = [&](int tile) { return w.begin + tile * kTileTokens; };
  const CacheVectors vectors{p.num_kv_heads * p.block_size, w.kv_head * p.block_size};
  const auto load = [&](int tile, const TilePages<kHeadDim>& pages) {
    load_tile<kHeadDim>(k_stage(tile), k_stage(tile) + Layout::kTileBytes, k_scale_stage(tile),
                        k_scale_stage(tile) + kTileTokens, p, vectors, pages);
  };
  // The cursor of the next tile to look up, and the step from one tile to the next.
  TileCursor cursor{w.begin / p.block_size, w.begin % p.block_size};
  const TileCursor tile_step{kTileTokens / p.block_size, kTileTokens % p.block_size};
  const auto look_up_next = [&](int tile) {
    const TilePages<kHeadDim> pages = look_up_pages<kHeadDim>(w, cursor, tile_first(tile), p.block_size);
    cursor.block += tile_step.block;
    cursor.slot += tile_step.slot;
    if (cursor.slot >= p.block_size) {
      cursor.slot -= p.block_size;
      ++cursor.block;
    }
    return pages;
  };

  // Prologue: tiles [0, kFp8Stages - 1), one cp.async group each, and the pages of the next tile to load; before
  // waiting for the previous kernel unless one of them holds the current token (current_token_tile), whose K/V the
  // fused QK-norm/RoPE (p.fuse_rope) writes after the wait.
  TilePages<kHeadDim> pages;
  const auto prologue = [&] {
    pages = look_up_next(0);
#pragma unroll
    for (int tile = 0; tile < kFp8Stages - 1; ++tile) {
      if (tile < w.num_tiles) load(tile, pages);
      cp_async_commit();
      pages = look_up_next(tile + 1);
    }
  };
  copy_first_tiles_around_wait<kHeadDim, true>(p, w, kFp8Stages - 1, q_stage, warp, lane, prologue);
  Fp8WarpState<kHeadDim, kHeadBlocks> st;
  if (fused)
    load_query_fragments_t<kHeadDim, kHeadBlocks, true>(st.q, q_stage, w.group, lane);
  else
    load_query_fragments_t<kHeadDim, kHeadBlocks>(st.q, group_query<kHeadDim>(p, w), w.group, lane);

  const float scale_log2 = p.scale * kLog2e * fp8_code_unit();
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    cp_async_wait_group<kFp8Stages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                        // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kFp8Stages - 1;
    if (next < w.num_tiles) load(next, pages);
    cp_async_commit();
    pages = look_up_next(next + 1);  // used one iteration later
    attend_fp8_tile<kHeadDim>(st, k_stage(tile), k_stage(tile) + Layout::kTileBytes, k_scale_stage(tile),
                              k_scale_stage(tile) + kTileTokens, tile_first(tile), w.end, scale_log2, warp, lane);
  }
  cp_async_wait_all();
  __syncthreads();  // no warp reads the ring any more: it becomes the merge scratch
  __shared__ float head_stats[kWarps][2][kGroupRows];
  float* scratch = reinterpret_cast<float*>(ring);
  WarpState<kHeadDim> heads = fp8_states_to_head_rows(st, scratch, head_stats, warp, lane);
  finish_block<kHeadDim>(p, w, heads, scratch, kGroupRows, warp, lane, fragment_row_store<kHeadDim>(heads, lane));
}

}  // namespace

void launch_decode_attention_fp8(const DecodeAttentionArgs& params, const KernelStream& stream) {
  QINFER_CHECK(params.kv_dtype == KvCacheDtype::kFp8E4m3 && params.block_size % 16 == 0,
               "the fp8 decode attention kernel reads an fp8 cache of blocks of a multiple of 16 tokens");
  if (params.num_decode == 0) return;
  const bool one_head_block = fp8_head_blocks(params.num_heads / params.num_kv_heads) == 1;
  with_head_dim(params.head_dim, [&](auto dim) {
    constexpr int kHeadDim = decltype(dim)::value;
    const int shared = Fp8Layout<kHeadDim>::kSharedBytes + fused_query_stage_bytes<kHeadDim>(params);
    launch_decode_blocks(
        one_head_block ? decode_attention_fp8_kernel<kHeadDim, 1> : decode_attention_fp8_kernel<kHeadDim, 2>, params,
        shared, stream, params);
  });
}

}  // namespace qinfer::cuda
