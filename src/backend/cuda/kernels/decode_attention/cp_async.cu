// The bf16 decode attention kernel for sm_80+: K/V tiles reach shared memory by 16-byte cp.async per thread, through
// a swizzled 3-tile ring (docs/CUDA_DESIGN.md, "Decode attention: the family").
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// grid (num_splits, num_kv_heads, num_decode). The query heads of one GQA group are the rows of an m16 tile, so K and
// V of the group's KV head are read once and multiplied on tensor cores. 64-token K/V tiles stream through a
// kStages-deep cp.async ring (two tiles in flight while one is computed, one barrier per tile); each warp owns 16 keys
// of every tile and keeps its own online-softmax state, merged through shared memory at the end. The first tiles are
// copied before waiting for the previous kernel unless one of them holds the current token (current_token_tile); with
// p.fuse_rope the block's fused QK-norm/RoPE writes that token's K/V after the wait.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 2) decode_attention_kernel(DecodeAttentionArgs p) {
  constexpr int kTileElements = kTileTokens * kHeadDim;
  allow_dependents();
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool fused = p.fuse_rope;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  __nv_bfloat16* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [kStages][K|V][kTileTokens][kHeadDim]
  // With the fused RoPE: the group's query heads [group][kHeadDim] after the ring.
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(shared_raw + ring_bytes<kHeadDim>());
  const auto k_stage = [&](int tile) { return tiles + (tile % kStages) * 2 * kTileElements; };
  const auto load = [&](int tile) {
    load_kv_tiles<kHeadDim, kThreads, kTileTokens>(k_stage(tile), k_stage(tile) + kTileElements, p.k_cache, p.v_cache,
                                                   w.table, w.begin + tile * kTileTokens, w.end, w.kv_head,
                                                   p.num_kv_heads, p.block_size);
  };

  // Prologue: the first kStages - 1 tiles, one cp.async group each (empty groups keep the count uniform).
  const auto prologue = [&] {
#pragma unroll
    for (int tile = 0; tile < kStages - 1; ++tile) {
      if (tile < w.num_tiles) load(tile);
      cp_async_commit();
    }
  };
  copy_first_tiles_around_wait<kHeadDim, false>(p, w, kStages - 1, q_stage, warp, lane, prologue);
  WarpState<kHeadDim> st;
  if (fused)
    load_query_fragments<kHeadDim, true>(st.q_frag, q_stage, w.group, lane);
  else
    load_query_fragments<kHeadDim>(st.q_frag, group_query<kHeadDim>(p, w), w.group, lane);

  const float scale_log2 = p.scale * kLog2e;
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    cp_async_wait_group<kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                     // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kStages - 1;
    if (next < w.num_tiles) load(next);
    cp_async_commit();
    // Rows past `end` were zero-filled by the copy.
    attend_tile<kHeadDim>(
        st, k_stage(tile), k_stage(tile) + kTileElements,
        [](int row, int chunk) { return swizzle<kHeadDim>(row, chunk); }, w.begin + tile * kTileTokens, w.end,
        scale_log2, warp, lane);
  }
  cp_async_wait_all();
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(tiles), kGroupRows, warp, lane,
                         fragment_row_store<kHeadDim>(st, lane));
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionArgs& p, const KernelStream& stream) {
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= ring_bytes<kHeadDim>(), "merge scratch must fit");
  const int shared = ring_bytes<kHeadDim>() + fused_query_stage_bytes<kHeadDim>(p);
  launch_decode_blocks(decode_attention_kernel<kHeadDim>, p, shared, stream, p);
}

}  // namespace

void launch_decode_attention_cp_async(const DecodeAttentionArgs& args, const KernelStream& stream) {
  with_head_dim(args.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(args, stream); });
}

}  // namespace qinfer::cuda
