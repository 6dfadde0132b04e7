// Hopper decode attention over the fp8 KV cache: the blocks of decode_attention_fp8.cu (per-warp conversion of E4M3
// bytes into an fp16 staging tile, fp16 tensor cores with the scales folded into scores and probabilities), with tiles
// brought into shared memory by the bulk copy engine as in decode_attention_sm90.cu instead of per-thread cp.async.
// Two tensor maps view the K and V byte pools as [pool_blocks * num_kv_heads * block_size rows][head_dim]; one box is
// the 16 keys of one page, head_dim bytes each, landed unswizzled (the conversion reads each key's bytes in order, so
// consecutive lanes read consecutive 16-byte chunks without bank conflicts). A key group's 16 K and 16 V scales are
// contiguous in their pools and come with it as two 64-byte bulk copies on the same stage barrier.
#include <cuda.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/decode_attention_fp8_tile.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_map.h"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/kernels/hopper_wgmma.cuh"
#endif

namespace qinfer::cuda {

namespace {

using namespace decode_block;

constexpr int kBoxTokens = 16;    // keys per box: the block size is a multiple of 16, so a box never crosses a page
constexpr int kAlignSlack = 128;  // bulk tensor copies without swizzle land at 128-byte aligned addresses

struct Fp8BulkCopyParams {
  CUtensorMap k_map;  // k_fp8 as [pool_blocks * num_kv_heads * block_size][head_dim] bytes, boxes kBoxTokens rows
  CUtensorMap v_map;  // v_fp8, the same
  DecodeAttentionParams attention;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Keys at or past `end` in this warp's 16 rows of the last tile hold stale, never-copied or poisoned bytes and
// scales: zero their V bytes and V scales so that probability 0 times V stays 0 and the warp's V reference
// (attend_fp8_tile) sees only real scales. K needs nothing: those keys' scores are masked by selection. The stage's
// copies completed (its barrier was waited on), and no later copy targets it.
template <int kHeadDim>
__device__ __forceinline__ void zero_v_past_end(uint8_t* v_tile, float* v_scales, int tile_first, int end, int warp,
                                                int lane) {
  constexpr int kRowChunks = kHeadDim / 16;
  const int valid = max(0, min(kWarpKeys, end - tile_first - warp * kWarpKeys));
  for (int index = lane; index < (kWarpKeys - valid) * kRowChunks; index += 32) {
    const int row = warp * kWarpKeys + valid + index / kRowChunks, chunk = index % kRowChunks;
    *reinterpret_cast<uint4*>(v_tile + row * kHeadDim + chunk * 16) = make_uint4(0, 0, 0, 0);
  }
  if (lane >= valid && lane < kWarpKeys) v_scales[warp * kWarpKeys + lane] = 0.0f;
  __syncwarp();
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (num_splits, num_kv_heads, num_decode), as decode_attention_kernel. Tile t goes to stage t % kFp8Stages; after
// the barrier that ends tile t - 1 (whose stage it reuses) warp 0 issues tile t + kFp8Stages - 1, so two tiles are in
// flight while one is computed; each stage's mbarrier completes when its boxes and scales have landed.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 3)
    decode_attention_fp8_bulk_copy_kernel(const __grid_constant__ Fp8BulkCopyParams params) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Layout = Fp8Layout<kHeadDim>;
  constexpr int kBoxBytes = kBoxTokens * kHeadDim;
  constexpr int kScaleBoxBytes = kBoxTokens * 4;
  const DecodeAttentionParams& p = params.attention;
  const CUtensorMap* k_map = &params.k_map;  // copies read the maps in parameter memory
  const CUtensorMap* v_map = &params.v_map;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  __shared__ uint64_t full[kFp8Stages];
  extern __shared__ unsigned char shared_raw[];
  // Fp8Layout: the byte ring, the scale ring, the staging tiles; 128-byte aligned.
  uint8_t* ring = shared_raw + ((kAlignSlack - (sm90::shared_address(shared_raw) % kAlignSlack)) % kAlignSlack);
  float* scale_ring = reinterpret_cast<float*>(ring + Layout::kRingBytes);
  __half* staging =
      reinterpret_cast<__half*>(ring + Layout::kRingBytes + Layout::kScaleBytes) + warp * Layout::kStagingElements;
  const auto k_stage = [&](int tile) { return ring + (tile % kFp8Stages) * 2 * Layout::kTileBytes; };
  const auto k_scale_stage = [&](int tile) { return scale_ring + (tile % kFp8Stages) * 2 * kTileTokens; };
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kFp8Stages; ++stage) sm90::mbarrier_init(&full[stage], 1);
    sm90::fence_mbarrier_init();
  }
  allow_dependents();
  wait_for_producer();
  const BlockWork w = block_work(p);
  __syncthreads();  // the barriers are initialised

  // Warp 0 copies tiles: lane g < 4 copies the 16-key group g of a tile (K and V bytes, K and V scales) from the box
  // row of its page; groups wholly at or past `end` are not copied. The page of the tile after the one issued is
  // looked up one step ahead, so the block-table read is off the critical path.
  const auto box_row = [&](int tile) -> int64_t {
    const int token = w.begin + tile * kTileTokens + lane * kBoxTokens;
    if (tile >= w.num_tiles || lane >= kTileTokens / kBoxTokens || token >= w.end) return 0;
    const int64_t page = w.table[token / p.block_size];
    return (page * p.num_kv_heads + w.kv_head) * p.block_size + token % p.block_size;
  };
  const auto issue = [&](int tile, int64_t row) {
    const int stage = tile % kFp8Stages;
    const int first = w.begin + tile * kTileTokens;
    const int groups = (min(kTileTokens, w.end - first) + kBoxTokens - 1) / kBoxTokens;
    if (lane == 0) sm90::mbarrier_arrive_expect_tx(&full[stage], groups * 2 * (kBoxBytes + kScaleBoxBytes));
    if (lane < groups) {
      uint8_t* k_box = k_stage(tile) + lane * kBoxBytes;
      float* k_scale_box = k_scale_stage(tile) + lane * kBoxTokens;
      sm90::tma_load_2d(sm90::shared_address(k_box), k_map, 0, static_cast<int>(row), &full[stage]);
      sm90::tma_load_2d(sm90::shared_address(k_box + Layout::kTileBytes), v_map, 0, static_cast<int>(row),
                        &full[stage]);
      sm90::bulk_copy(sm90::shared_address(k_scale_box), p.k_scales + row, kScaleBoxBytes, &full[stage]);
      sm90::bulk_copy(sm90::shared_address(k_scale_box + kTileTokens), p.v_scales + row, kScaleBoxBytes, &full[stage]);
    }
  };
  int64_t next_row = 0;  // warp 0: the box row of tile kFp8Stages - 1, then of each next tile to issue
  if (warp == 0) {
    for (int tile = 0; tile < kFp8Stages - 1 && tile < w.num_tiles; ++tile) issue(tile, box_row(tile));
    next_row = box_row(kFp8Stages - 1);
  }

  WarpState<kHeadDim> st;
  load_query_fragments<kHeadDim>(
      st.q_frag, p.q + (static_cast<int64_t>(w.q_row) * p.num_heads + w.kv_head * w.group) * kHeadDim, w.group, lane);
  query_fragments_to_f16<kHeadDim>(st.q_frag);
  float v_reference = 0;  // this warp's O is in units of it (attend_fp8_tile)
  const float scale_log2 = p.scale * kLog2e;
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    __syncthreads();  // everyone is done with tile - 1, whose stage is refilled now
    const int next = tile + kFp8Stages - 1;
    if (warp == 0 && next < w.num_tiles) {
      issue(next, next_row);
      next_row = box_row(next + 1);
    }
    sm90::mbarrier_wait(&full[tile % kFp8Stages], (tile / kFp8Stages) & 1);
    const int tile_first = w.begin + tile * kTileTokens;
    uint8_t* k_tile = k_stage(tile);
    float* k_scales = k_scale_stage(tile);
    if (tile == w.num_tiles - 1)
      zero_v_past_end<kHeadDim>(k_tile + Layout::kTileBytes, k_scales + kTileTokens, tile_first, w.end, warp, lane);
    attend_fp8_tile<kHeadDim>(st, v_reference, staging, k_tile, k_tile + Layout::kTileBytes, k_scales,
                              k_scales + kTileTokens, tile_first, w.end, scale_log2, warp, lane);
    __syncwarp();  // the warp's reads of its staging tile are done before the next tile overwrites it
  }
  apply_v_reference(st, v_reference);
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(ring), warp, lane);
#else
  (void)params;
#endif
}

template <int kHeadDim>
void launch_for_head_dim(const Fp8BulkCopyParams& params, cudaStream_t stream) {
  using Layout = Fp8Layout<kHeadDim>;
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= Layout::kRingBytes, "merge scratch must fit in the ring");
  constexpr int kShared = Layout::kSharedBytes + kAlignSlack;
  const auto kernel = decode_attention_fp8_bulk_copy_kernel<kHeadDim>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const DecodeAttentionParams& p = params.attention;
  launch_dependent(kernel, dim3(p.num_splits, p.num_kv_heads, p.num_decode), kThreads, kShared, stream, params);
}

}  // namespace

void launch_decode_attention_fp8_bulk_copy(const DecodeAttentionParams& params, cudaStream_t stream) {
  QINFER_CHECK(params.k_fp8 != nullptr && decode_attention_bulk_copy_available(params),
               "the fp8 bulk-copy decode attention needs an fp8 cache, an sm_90a build, a compute 9.0 device, "
               "pool_blocks and a block size that is a multiple of 16");
  if (params.num_decode == 0) return;
  const int64_t rows = params.pool_blocks * params.num_kv_heads * params.block_size;
  Fp8BulkCopyParams bulk;
  bulk.k_map = make_u8_tensor_map(params.k_fp8, rows, params.head_dim, kBoxTokens);
  bulk.v_map = make_u8_tensor_map(params.v_fp8, rows, params.head_dim, kBoxTokens);
  bulk.attention = params;
  with_head_dim(params.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(bulk, stream); });
}

}  // namespace qinfer::cuda
