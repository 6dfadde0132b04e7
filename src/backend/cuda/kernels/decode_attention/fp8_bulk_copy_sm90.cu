// Hopper decode attention over the fp8 KV cache (head_dim 128): the blocks of fp8_cp_async.cu (split-KV, GQA
// group on tensor cores, fragments built straight from the E4M3 bytes by attend_fp8_tile, in-kernel merge) with tiles
// brought into shared memory by the bulk tensor copy engine, as bulk_copy_sm90.cu does for bf16, instead of
// 1 024 per-thread cp.async copies with 64-bit paged addresses per tile. Two uint8 tensor maps view the K and V pools
// as [pool_blocks * num_kv_heads * block_size rows][128 bytes]; one box is the 16 keys of one page, landed with the
// 128-byte swizzle, which puts 16-byte chunk c of tile row r at chunk c ^ (r % 8): exactly fp8_chunk_offset<128>, the
// layout attend_fp8_tile reads. A 16-key group's 16 K and 16 V scales are contiguous in their pools and come as two
// 64-byte bulk copies on the same stage barrier. Four lanes of warp 0 issue a tile; no thread computes a copy address
// beyond one page lookup. head_dim 64 (64-byte rows, fp8_chunk_offset XOR-ing by row % 4, which no copy-engine swizzle
// produces) stays on the cp.async kernel. docs/CUDA_DESIGN.md, "Decode attention: the family".
#include <cuda.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_fragments.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_map.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda {

namespace {

using namespace decode_block;

constexpr int kHeadDim = 128;  // one 128-byte row per key: the span of the 128-byte swizzle
// Tiles in the ring: the one computed and one in flight. Measured 1-4 % faster than 3 (docs/CUDA_DESIGN.md, "Decode
// attention: which kernel"; not profiled: likely the larger L1 that the smaller ring leaves, with one tile in flight
// enough to cover a copy).
constexpr int kBulkStages = 2;
constexpr int kBlocksPerSm = kFp8BulkCopyBlocksPerSm;
constexpr int kAlignSlack = 1024;  // the ring starts at a 1024-byte boundary, where the swizzle pattern repeats

// Shared memory: the byte ring [kBulkStages][K|V][kTileTokens][128] (1024-byte aligned, each 16-key box 2 KB), the
// scale ring [kBulkStages][K|V][kTileTokens] fp32 and, with the fused RoPE, the group's query heads [8][128] bf16. The
// kernel serves GQA groups of at most 8 (one head block, fp8_head_blocks): the hand-over of the warps' transposed O
// (TransposedScratch) must fit in the ring too.
struct BulkLayout {
  static constexpr int kTileBytes = kTileTokens * kHeadDim;
  static constexpr int kRingBytes = kBulkStages * 2 * kTileBytes;
  static constexpr int kScaleBytes = kBulkStages * 2 * kTileTokens * 4;
  static constexpr int kQueryBytes = 8 * kHeadDim * 2;
  static constexpr int kSharedBytes = kRingBytes + kScaleBytes + kAlignSlack;  // + kQueryBytes when fused
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= kRingBytes, "finish_block's merge scratch must fit in the ring");
  static_assert(kWarps * TransposedScratch<kHeadDim, 1>::kWarpFloats * 4 <= kRingBytes,
                "the transposed O hand-over must fit in the ring");
  // 228 KB per SM, 1 KB reserved per block, about 0.6 KB of static shared memory (barriers, finish_block's merge).
  static_assert(kBlocksPerSm * (kSharedBytes + kQueryBytes + 1024 + 640) <= 228 * 1024,
                "kBlocksPerSm blocks must fit an SM");
};

struct Fp8BulkCopyParams {
  CUtensorMap k_map;  // k_fp8 as [pool_blocks * num_kv_heads * block_size][128] bytes, boxes kBoxTokens rows
  CUtensorMap v_map;  // v_fp8, the same
  DecodeAttentionArgs attention;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Keys at or past `end` in this warp's 16 rows of the last tile hold stale, never-copied or poisoned bytes: zero their
// V rows so that probability 0 times V stays 0 (their K rows are masked by selection and their V scales count as zero
// in fp8_probabilities). The swizzle only moves chunks within a row, so whole rows are zeroed in place. The
// stage's copies completed (its barrier was waited on), and no later copy targets it.
__device__ __forceinline__ void zero_v_rows_past_end(uint8_t* v_tile, int tile_first, int end, int warp, int lane) {
  constexpr int kRowChunks = kHeadDim / 16;
  const int valid = max(0, min(kWarpKeys, end - tile_first - warp * kWarpKeys));
  for (int index = lane; index < (kWarpKeys - valid) * kRowChunks; index += 32) {
    const int row = warp * kWarpKeys + valid + index / kRowChunks, chunk = index % kRowChunks;
    *reinterpret_cast<uint4*>(v_tile + row * kHeadDim + chunk * 16) = make_uint4(0, 0, 0, 0);
  }
  __syncwarp();
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (num_splits, num_kv_heads, num_decode), as decode_attention_fp8_kernel. Tile t goes to stage t % kBulkStages;
// after the barrier that ends tile t - 1 (whose stage it reuses) warp 0 issues tile t + kBulkStages - 1; each stage's
// mbarrier completes when its boxes and scales have landed. One __syncthreads per tile: per-stage "empty" mbarriers
// instead (warps released one by one) measured 2-5 % slower (3 stages; docs/CUDA_DESIGN.md, "Tried and closed"). As in
// the bf16 kernel, the first tile is issued before waiting for the previous kernel unless it holds the current token
// (current_token_tile).
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    decode_attention_fp8_bulk_copy_kernel(const __grid_constant__ Fp8BulkCopyParams params) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Layout = BulkLayout;
  constexpr int kBoxBytes = kBoxTokens * kHeadDim;
  constexpr int kScaleBoxBytes = kBoxTokens * 4;
  const DecodeAttentionArgs& p = params.attention;
  const CUtensorMap* k_map = &params.k_map;  // copies read the maps in parameter memory
  const CUtensorMap* v_map = &params.v_map;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool fused = p.fuse_rope;

  __shared__ uint64_t full[kBulkStages];
  extern __shared__ unsigned char shared_raw[];
  uint8_t* ring = shared_raw + ((kAlignSlack - (sm90::shared_address(shared_raw) % kAlignSlack)) % kAlignSlack);
  float* scale_ring = reinterpret_cast<float*>(ring + Layout::kRingBytes);
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(ring + Layout::kRingBytes + Layout::kScaleBytes);
  const auto k_stage = [&](int tile) { return ring + (tile % kBulkStages) * 2 * Layout::kTileBytes; };
  const auto k_scale_stage = [&](int tile) { return scale_ring + (tile % kBulkStages) * 2 * kTileTokens; };
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kBulkStages; ++stage) sm90::mbarrier_init(&full[stage], 1);
    sm90::fence_mbarrier_init();
  }
  allow_dependents();
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const auto tile_first = [&](int tile) { return w.begin + tile * kTileTokens; };
  const int current_tile = current_token_tile(p, w);
  __syncthreads();  // the barriers are initialised

  // Warp 0 copies tiles: lane g < 4 copies the 16-key group g of a tile (K and V bytes, K and V scales) from the box
  // row of its page; groups wholly at or past `end` are not copied. The page of the tile after the one issued is
  // looked up one step ahead (box_row), so the block-table read is off the critical path.
  const auto issue = [&](int tile, int row) {
    uint64_t* barrier = &full[tile % kBulkStages];
    const int groups = (min(kTileTokens, w.end - tile_first(tile)) + kBoxTokens - 1) / kBoxTokens;
    if (lane == 0) sm90::mbarrier_arrive_expect_tx(barrier, groups * 2 * (kBoxBytes + kScaleBoxBytes));
    if (lane < groups) {
      uint8_t* k_box = k_stage(tile) + lane * kBoxBytes;
      float* k_scale_box = k_scale_stage(tile) + lane * kBoxTokens;
      sm90::tma_load_2d(sm90::shared_address(k_box), k_map, 0, row, barrier);
      sm90::tma_load_2d(sm90::shared_address(k_box + Layout::kTileBytes), v_map, 0, row, barrier);
      sm90::bulk_copy(sm90::shared_address(k_scale_box), p.k_scales + row, kScaleBoxBytes, barrier);
      sm90::bulk_copy(sm90::shared_address(k_scale_box + kTileTokens), p.v_scales + row, kScaleBoxBytes, barrier);
    }
  };
  const int prologue_tiles = min(kBulkStages - 1, w.num_tiles);
  int next_row = 0;  // warp 0: the box row of tile kBulkStages - 1, then of each next tile to issue
  if (warp == 0) {
    for (int tile = 0; tile < prologue_tiles; ++tile)
      if (tile != current_tile) issue(tile, box_row(p, w, tile, lane));
    next_row = box_row(p, w, kBulkStages - 1, lane);
  }
  const RopeLane<kHeadDim> rope = rope_lane<kHeadDim>(p, w, lane);
  wait_for_producer();
  if (fused) fused_rope<kHeadDim, true, true>(p, w, rope, q_stage, warp, lane);
  if (warp == 0 && current_tile >= 0 && current_tile < prologue_tiles)
    issue(current_tile, box_row(p, w, current_tile, lane));
  Fp8WarpState<kHeadDim, 1> st;
  if (fused)
    load_query_fragments_t<kHeadDim, 1, true>(st.q, q_stage, w.group, lane);
  else
    load_query_fragments_t<kHeadDim, 1>(st.q, group_query<kHeadDim>(p, w), w.group, lane);
  const float scale_log2 = p.scale * kLog2e * fp8_code_unit();
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    __syncthreads();  // everyone is done with tile - 1, whose stage is refilled now
    const int next = tile + kBulkStages - 1;
    if (warp == 0 && next < w.num_tiles) {
      issue(next, next_row);
      next_row = box_row(p, w, next + 1, lane);
    }
    sm90::mbarrier_wait(&full[tile % kBulkStages], (tile / kBulkStages) & 1);
    uint8_t* k_tile = k_stage(tile);
    const float* k_scales = k_scale_stage(tile);
    if (tile == w.num_tiles - 1) zero_v_rows_past_end(k_tile + Layout::kTileBytes, tile_first(tile), w.end, warp, lane);
    attend_fp8_tile<kHeadDim>(st, k_tile, k_tile + Layout::kTileBytes, k_scales, k_scales + kTileTokens,
                              tile_first(tile), w.end, scale_log2, warp, lane);
  }
  __syncthreads();  // no warp reads the ring any more: it becomes the merge scratch
  __shared__ float head_stats[kWarps][2][kGroupRows];
  float* scratch = reinterpret_cast<float*>(ring);
  WarpState<kHeadDim> heads = fp8_states_to_head_rows(st, scratch, head_stats, warp, lane);
  finish_block<kHeadDim>(p, w, heads, scratch, kGroupRows, warp, lane, fragment_row_store<kHeadDim>(heads, lane));
#else
  (void)params;
#endif
}

}  // namespace

void launch_decode_attention_fp8_bulk_copy(const DecodeAttentionArgs& params, const KernelStream& stream) {
  QINFER_CHECK(params.kv_dtype == KvCacheDtype::kFp8E4m3 && params.head_dim == kHeadDim &&
                   fp8_head_blocks(params.num_heads / params.num_kv_heads) == 1 &&
                   decode_attention_bulk_copy_available(params, stream.device),
               "the fp8 bulk-copy decode attention needs an fp8 cache with head_dim 128, GQA groups of at most 8, "
               "the sm_90a kernels on a compute 9.0 device, pool_blocks and a block size that is a multiple of 16");
  if (params.num_decode == 0) return;
  const int64_t rows = params.pool_blocks * params.num_kv_heads * params.block_size;
  Fp8BulkCopyParams bulk;
  bulk.k_map = make_u8_tensor_map_swizzle128(params.k_fp8, rows, kBoxTokens);
  bulk.v_map = make_u8_tensor_map_swizzle128(params.v_fp8, rows, kBoxTokens);
  bulk.attention = params;
  const int shared = BulkLayout::kSharedBytes + (params.fuse_rope ? BulkLayout::kQueryBytes : 0);
  launch_decode_blocks(decode_attention_fp8_bulk_copy_kernel, params, shared, stream, bulk);
}

}  // namespace qinfer::cuda
