// Hopper decode attention: the blocks of cp_async.cu (split-KV, GQA group on tensor cores, in-kernel merge),
// with K/V tiles brought into shared memory by the bulk tensor copy engine instead of per-thread cp.async. Two tensor
// maps view the paged K and V pools as [pool_blocks * num_kv_heads * block_size rows][head_dim]; one box is 16 keys of
// one cache block by 64 dims, landed 128-byte-swizzled, so a 64-key tile of one KV head is 4 page lookups and
// 4 * head_dim / 64 boxes each for K and V, issued by four lanes of warp 0 and completing on one mbarrier per stage.
// docs/CUDA_DESIGN.md, "Decode attention: the family", has the profile that motivated it and what it reaches.
#include <cuda.h>

#include <cstdint>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_map.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda {

namespace {

using namespace decode_block;

constexpr int kBoxDims = 64;       // 128 bytes of bf16: the span of the 128-byte swizzle
constexpr int kAlignSlack = 1024;  // the ring starts at a 1024-byte boundary, where the swizzle pattern repeats

struct BulkCopyParams {
  CUtensorMap k_map;  // k_cache as [pool_blocks * num_kv_heads * block_size][head_dim], boxes kBoxTokens x kBoxDims
  CUtensorMap v_map;  // v_cache, the same
  DecodeAttentionArgs attention;
};

template <int kHeadDim, int kRingStages>
constexpr int shared_bytes() {
  return ring_bytes<kHeadDim, kRingStages>() + kAlignSlack;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// A K or V tile in shared memory is [kHeadDim / 64 slabs][kTileTokens rows][64] bf16, each 128-byte row's 16-byte
// chunks XOR-swizzled by (row % 8) as the copy engine lands them. Element offset of chunk `chunk` (8 dims) of `row`.
template <int kHeadDim>
__device__ __forceinline__ int slab_chunk_offset(int row, int chunk) {
  return (chunk / 8) * kTileTokens * kBoxDims + row * kBoxDims + (((chunk % 8) ^ (row & 7)) << 3);
}

// Keys at or past `end` in this warp's 16 rows of the last tile hold stale or never-copied bytes: zero their V rows so
// that probability 0 times V stays 0. The rows' copies completed (the stage's barrier was waited on), and no later
// copy targets this stage.
template <int kHeadDim>
__device__ __forceinline__ void zero_v_rows_past_end(unsigned char* v_tile, int tile_first, int end, int warp,
                                                     int lane) {
  constexpr int kRowChunks = kHeadDim / 8;
  const int valid = max(0, min(16, end - tile_first - warp * 16));
  for (int index = lane; index < (16 - valid) * kRowChunks; index += 32) {
    const int row = warp * 16 + valid + index / kRowChunks, chunk = index % kRowChunks;
    *reinterpret_cast<uint4*>(v_tile + (chunk / 8) * kTileTokens * 128 + row * 128 + (chunk % 8) * 16) =
        make_uint4(0, 0, 0, 0);
  }
  __syncwarp();
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (num_splits, num_kv_heads, num_decode), as cp_async.cu's decode_attention_kernel. Tile t goes to stage t %
// kRingStages; after the barrier that ends tile t - 1 (whose stage it reuses) warp 0 issues tile t + kRingStages - 1,
// so kRingStages - 1 tiles are in flight while one is computed: 3 stages at 2 blocks per SM (4 tiles in flight per SM),
// or 2 stages at 3 blocks per SM (3 tiles, but splits planned 1.5 times finer, which wins where a batch fills one wave:
// kAuto's kBulkCopyTwoStage). Each stage's mbarrier completes when all its boxes have landed. The first tiles are
// issued before waiting for the previous kernel, except the one holding the current token (current_token_tile), issued
// after the wait and, with p.fuse_rope, after this block's fused QK-norm/RoPE wrote that token's K/V.
template <int kHeadDim, int kRingStages>
__global__ void __launch_bounds__(kThreads, kRingStages == 2 ? 3 : 2)
    decode_attention_bulk_copy_kernel(const __grid_constant__ BulkCopyParams params) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kSlabs = kHeadDim / kBoxDims;
  constexpr int kTileBytes = kTileTokens * kHeadDim * 2;  // one K or V tile
  constexpr int kBoxBytes = kBoxTokens * kBoxDims * 2;
  const DecodeAttentionArgs& p = params.attention;
  const CUtensorMap* k_map = &params.k_map;  // copies read the maps in parameter memory
  const CUtensorMap* v_map = &params.v_map;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool fused = p.fuse_rope;

  __shared__ uint64_t full[kRingStages];
  extern __shared__ unsigned char shared_raw[];
  // [kRingStages][K|V][kSlabs][kTileTokens][64] bf16, 1024-byte aligned; with the fused RoPE the group's query heads
  // ([group][kHeadDim] bf16) after it.
  unsigned char* ring = shared_raw + ((1024 - (sm90::shared_address(shared_raw) & 1023)) & 1023);
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(ring + ring_bytes<kHeadDim, kRingStages>());
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kRingStages; ++stage) sm90::mbarrier_init(&full[stage], 1);
    sm90::fence_mbarrier_init();
  }
  allow_dependents();
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int current_tile = current_token_tile(p, w);
  __syncthreads();  // the barriers are initialised

  // Warp 0 copies tiles: lane g < 4 copies the 16-key group g of a tile, K and V, from the box row of its page;
  // groups wholly at or past `end` are not copied (their keys are masked, their V rows zeroed in the last tile). The
  // page of the tile after the one issued is looked up one step ahead, so the block-table read is off the critical
  // path.
  const auto issue = [&](int tile, int row) {
    const int stage = tile % kRingStages;
    const int first = w.begin + tile * kTileTokens;
    const int groups = (min(kTileTokens, w.end - first) + kBoxTokens - 1) / kBoxTokens;
    if (lane == 0) sm90::mbarrier_arrive_expect_tx(&full[stage], groups * 2 * kSlabs * kBoxBytes);
    if (lane < groups) {
      unsigned char* k_box = ring + stage * 2 * kTileBytes + lane * kBoxBytes;
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab) {
        const int offset = slab * kTileTokens * kBoxDims * 2;
        sm90::tma_load_2d(sm90::shared_address(k_box + offset), k_map, slab * kBoxDims, row, &full[stage]);
        sm90::tma_load_2d(sm90::shared_address(k_box + kTileBytes + offset), v_map, slab * kBoxDims, row, &full[stage]);
      }
    }
  };
  const int prologue_tiles = min(kRingStages - 1, w.num_tiles);
  int next_row = 0;  // warp 0: the box row of tile kRingStages - 1, then of each next tile to issue
  if (warp == 0) {
    for (int tile = 0; tile < prologue_tiles; ++tile)
      if (tile != current_tile) issue(tile, box_row(p, w, tile, lane));
    next_row = box_row(p, w, kRingStages - 1, lane);
  }
  const RopeLane<kHeadDim> rope = rope_lane<kHeadDim>(p, w, lane);
  wait_for_producer();
  if (fused) fused_rope<kHeadDim, false, true>(p, w, rope, q_stage, warp, lane);
  if (warp == 0 && current_tile >= 0 && current_tile < prologue_tiles)
    issue(current_tile, box_row(p, w, current_tile, lane));

  WarpState<kHeadDim> st;
  if (fused)
    load_query_fragments<kHeadDim, true>(st.q_frag, q_stage, w.group, lane);
  else
    load_query_fragments<kHeadDim>(st.q_frag, group_query<kHeadDim>(p, w), w.group, lane);
  const float scale_log2 = p.scale * kLog2e;
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    __syncthreads();  // everyone is done with tile - 1, whose stage is refilled now
    const int next = tile + kRingStages - 1;
    if (warp == 0 && next < w.num_tiles) {
      issue(next, next_row);
      next_row = box_row(p, w, next + 1, lane);
    }
    unsigned char* k_tile = ring + (tile % kRingStages) * 2 * kTileBytes;
    sm90::mbarrier_wait(&full[tile % kRingStages], (tile / kRingStages) & 1);
    const int tile_first = w.begin + tile * kTileTokens;
    if (tile == w.num_tiles - 1) zero_v_rows_past_end<kHeadDim>(k_tile + kTileBytes, tile_first, w.end, warp, lane);
    attend_tile<kHeadDim>(
        st, reinterpret_cast<const __nv_bfloat16*>(k_tile), reinterpret_cast<const __nv_bfloat16*>(k_tile + kTileBytes),
        [](int row, int chunk) { return slab_chunk_offset<kHeadDim>(row, chunk); }, tile_first, w.end, scale_log2, warp,
        lane);
  }
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(ring), kGroupRows, warp, lane,
                         fragment_row_store<kHeadDim>(st, lane));
#else
  (void)params;
#endif
}

// The tensor map of one pool: rows of head_dim bf16, boxes of kBoxTokens rows by kBoxDims, 128-byte swizzle.
CUtensorMap pool_tensor_map(const __nv_bfloat16* cache, const DecodeAttentionArgs& p) {
  static_assert(kBoxDims == 64, "make_bf16_tensor_map_swizzle128 boxes are 64 columns wide");
  return make_bf16_tensor_map_swizzle128(cache, p.pool_blocks * p.num_kv_heads * p.block_size, p.head_dim, kBoxTokens);
}

template <int kHeadDim, int kRingStages>
void launch_for_head_dim(const BulkCopyParams& params, const KernelStream& stream) {
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= ring_bytes<kHeadDim, kRingStages>(), "merge scratch must fit");
  const int shared = shared_bytes<kHeadDim, kRingStages>() + fused_query_stage_bytes<kHeadDim>(params.attention);
  launch_decode_blocks(decode_attention_bulk_copy_kernel<kHeadDim, kRingStages>, params.attention, shared, stream,
                       params);
}

}  // namespace

bool decode_attention_bulk_copy_available(const DecodeAttentionParams& p, const DeviceCapabilities& device) {
  const int64_t rows = p.pool_blocks * p.num_kv_heads * p.block_size;  // box row coordinates are int32
  const auto aligned = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  return device.hopper_kernels && p.pool_blocks > 0 && p.block_size % kBoxTokens == 0 &&
         rows <= std::numeric_limits<int32_t>::max() && aligned(p.k_cache) && aligned(p.v_cache) && aligned(p.k_fp8) &&
         aligned(p.v_fp8) && aligned(p.k_scales) && aligned(p.v_scales);
}

void launch_decode_attention_bulk_copy(const DecodeAttentionArgs& params, const KernelStream& stream, int ring_stages) {
  QINFER_CHECK(decode_attention_bulk_copy_available(params, stream.device),
               "the bulk-copy decode attention needs the sm_90a kernels on a compute 9.0 device, pool_blocks and a "
               "block size that is a multiple of 16");
  QINFER_CHECK(params.kv_dtype == KvCacheDtype::kBf16, "the bulk-copy decode attention kernel reads a bf16 cache");
  QINFER_CHECK(ring_stages == 2 || ring_stages == kStages,
               "the bulk-copy decode attention runs a ring of 2 or 3 tiles");
  if (params.num_decode == 0) return;
  BulkCopyParams bulk;
  bulk.k_map = pool_tensor_map(params.k_cache, params);
  bulk.v_map = pool_tensor_map(params.v_cache, params);
  bulk.attention = params;
  with_head_dim(params.head_dim, [&](auto dim) {
    if (ring_stages == 2)
      launch_for_head_dim<decltype(dim)::value, 2>(bulk, stream);
    else
      launch_for_head_dim<decltype(dim)::value, kStages>(bulk, stream);
  });
}

}  // namespace qinfer::cuda
