// Decode attention over the fp8 KV cache: decode_attention.cu's blocks (split-KV, GQA group on tensor cores, in-kernel
// merge) reading E4M3 tiles and their scales, half the bytes of bf16, through a cp.async ring. Each warp builds its
// tensor-core fragments straight from the ring's bytes (decode_attention_fp8_fragments.cuh): no staging pass of fp16
// copies, so a head_dim 128 block needs 53.5 KB of shared memory and four blocks (16 warps) share a Hopper SM. The
// pages of a tile's rows are looked up one iteration before its copies start, so no block-table load sits in front of
// them. A staging kernel (each warp converting its keys into an fp16 tile for ldmatrix) ran 23-40 % slower and was
// removed (docs/CUDA_NOTES.md, "fp8 decode attention, direct fragments").
#include <utility>

#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/decode_attention_fp8_fragments.cuh"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// The pages of this thread's copy rows of one tile, looked up ahead of the copies (-1: the row is at or past `end`).
// Data rows: threadIdx.x / kChunks + pass * kRowsPerPass; threads [0, 32) also copy one 16-byte chunk of 4 scales.
template <int kHeadDim>
struct TilePages {
  static constexpr int kChunks = kHeadDim / 16;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kPasses = kTileTokens / kRowsPerPass;
  int32_t data[kPasses];
  int32_t scales;
};

__device__ __forceinline__ int32_t page_of(const BlockWork& w, int token, int block_size) {
  return token < w.end ? __ldg(w.table + token / block_size) : -1;
}

// Row (within the tile) of the 4 scales that thread `thread` < 32 copies: threads [0, 16) K, [16, 32) V.
__device__ __forceinline__ int scale_row(int thread) { return (thread % (kTileTokens / 4)) * 4; }

template <int kHeadDim>
__device__ __forceinline__ TilePages<kHeadDim> look_up_pages(const BlockWork& w, int first, int block_size) {
  using Pages = TilePages<kHeadDim>;
  Pages pages;
#pragma unroll
  for (int pass = 0; pass < Pages::kPasses; ++pass)
    pages.data[pass] = page_of(w, first + threadIdx.x / Pages::kChunks + pass * Pages::kRowsPerPass, block_size);
  pages.scales = threadIdx.x < 2 * kTileTokens / 4 ? page_of(w, first + scale_row(threadIdx.x), block_size) : -1;
  return pages;
}

// Starts the copies of one tile from pages looked up before: fp8 rows of K and V into swizzled chunks
// (fp8_chunk_offset; rows past `end` zero-filled) and their scales (4 per 16-byte chunk, which never crosses a page:
// block sizes are multiples of 16; zero-filled past `end`, stale within a chunk that `end` cuts).
template <int kHeadDim>
__device__ __forceinline__ void load_tile(uint8_t* k_tile, uint8_t* v_tile, float* k_scales, float* v_scales,
                                          const DecodeAttentionParams& p, const BlockWork& w, int first,
                                          const TilePages<kHeadDim>& pages) {
  using Pages = TilePages<kHeadDim>;
  const int chunk = threadIdx.x % Pages::kChunks;
#pragma unroll
  for (int pass = 0; pass < Pages::kPasses; ++pass) {
    const int row = threadIdx.x / Pages::kChunks + pass * Pages::kRowsPerPass, token = first + row;
    const bool valid = pages.data[pass] >= 0;
    int64_t offset = 0;
    if (valid)
      offset = ((static_cast<int64_t>(pages.data[pass]) * p.num_kv_heads + w.kv_head) * p.block_size +
                token % p.block_size) *
                   kHeadDim +
               chunk * 16;
    cp_async_16(k_tile + fp8_chunk_offset<kHeadDim>(row, chunk), p.k_fp8 + offset, valid);
    cp_async_16(v_tile + fp8_chunk_offset<kHeadDim>(row, chunk), p.v_fp8 + offset, valid);
  }
  if (threadIdx.x < 2 * kTileTokens / 4) {
    const bool is_v = threadIdx.x >= kTileTokens / 4, valid = pages.scales >= 0;
    const int row = scale_row(threadIdx.x);
    int64_t offset = 0;
    if (valid)
      offset = (static_cast<int64_t>(pages.scales) * p.num_kv_heads + w.kv_head) * p.block_size +
               (first + row) % p.block_size;
    cp_async_16((is_v ? v_scales : k_scales) + row, (is_v ? p.v_scales : p.k_scales) + offset, valid);
  }
}

// grid (num_splits, num_kv_heads, num_decode), as decode_attention_kernel; one barrier per tile.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, Fp8Layout<kHeadDim>::kBlocksPerSm)
    decode_attention_fp8_kernel(DecodeAttentionParams p) {
  using Layout = Fp8Layout<kHeadDim>;
  allow_dependents();
  wait_for_producer();
  const BlockWork w = block_work(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  uint8_t* ring = shared_raw;
  float* scale_ring = reinterpret_cast<float*>(shared_raw + Layout::kRingBytes);
  uint4* q_fragments = reinterpret_cast<uint4*>(shared_raw + Layout::kRingBytes + Layout::kScaleBytes);
  const auto k_stage = [&](int tile) { return ring + (tile % kFp8Stages) * 2 * Layout::kTileBytes; };
  const auto k_scale_stage = [&](int tile) { return scale_ring + (tile % kFp8Stages) * 2 * kTileTokens; };
  const auto tile_first = [&](int tile) { return w.begin + tile * kTileTokens; };
  const auto load = [&](int tile, const TilePages<kHeadDim>& pages) {
    load_tile<kHeadDim>(k_stage(tile), k_stage(tile) + Layout::kTileBytes, k_scale_stage(tile),
                        k_scale_stage(tile) + kTileTokens, p, w, tile_first(tile), pages);
  };

  // Prologue: tiles [0, kFp8Stages - 1), one cp.async group each, and the pages of the next tile to load.
  TilePages<kHeadDim> pages = look_up_pages<kHeadDim>(w, tile_first(0), p.block_size);
#pragma unroll
  for (int tile = 0; tile < kFp8Stages - 1; ++tile) {
    if (tile < w.num_tiles) load(tile, pages);
    cp_async_commit();
    pages = look_up_pages<kHeadDim>(w, tile_first(tile + 1), p.block_size);
  }
  WarpState<kHeadDim> st;
  if (warp == 0) {  // the first iteration's barrier publishes them
    load_permuted_query_fragments<kHeadDim>(
        st.q_frag, p.q + (static_cast<int64_t>(w.q_row) * p.num_heads + w.kv_head * w.group) * kHeadDim, w.group, lane);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
      q_fragments[kk * 32 + lane] = make_uint4(st.q_frag[kk][0], st.q_frag[kk][1], st.q_frag[kk][2], st.q_frag[kk][3]);
  }
  float v_reference = 0;  // this warp's O is in units of v_reference * fp8_code_unit() (fp8_tile_probabilities)

  const float scale_log2 = p.scale * kLog2e * fp8_code_unit();
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    cp_async_wait_group<kFp8Stages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                        // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kFp8Stages - 1;
    if (next < w.num_tiles) load(next, pages);
    cp_async_commit();
    pages = look_up_pages<kHeadDim>(w, tile_first(next + 1), p.block_size);  // used one iteration later
    attend_fp8_tile<kHeadDim>(st, v_reference, q_fragments, k_stage(tile), k_stage(tile) + Layout::kTileBytes,
                              k_scale_stage(tile), k_scale_stage(tile) + kTileTokens, tile_first(tile), w.end,
                              scale_log2, warp, lane);
  }
  apply_v_reference(st, v_reference * fp8_code_unit());
  cp_async_wait_all();
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(ring), warp, lane, PermutedColumns<kHeadDim>{});
}

}  // namespace

void launch_decode_attention_fp8(const DecodeAttentionParams& params, cudaStream_t stream) {
  launch_fp8_decode_kernel(params, stream, [](auto dim) {
    return std::pair(decode_attention_fp8_kernel<decltype(dim)::value>, Fp8Layout<decltype(dim)::value>::kSharedBytes);
  });
}

}  // namespace qinfer::cuda
