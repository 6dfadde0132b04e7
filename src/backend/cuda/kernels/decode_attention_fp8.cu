// Decode attention over the fp8 KV cache: decode_attention.cu's blocks (split-KV, GQA group on tensor cores, in-kernel
// merge) reading E4M3 tiles and their scales, half the bytes of bf16. 64-key tiles of fp8 bytes and scales stream
// through a cp.async ring. Each warp converts its own 16 keys' bytes to fp16 (one packed cvt per two values; every
// E4M3 value is exact in fp16) into a per-warp staging tile, and multiplies on fp16 tensor cores with the scales
// folded in where they cost least: a key's K scale multiplies its score, its V scale its probability. Scaling every
// element instead (bf16(float(byte) * scale), then the bf16 tile step) made the kernel instruction-bound at the bf16
// kernel's speed (docs/CUDA_NOTES.md).
#include <utility>

#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/decode_attention_fp8_tile.cuh"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// Starts the copies of one tile: fp8 rows of K and V (16-byte chunks; rows past `end` zero-filled) and their scales
// (4 per 16-byte chunk, which never crosses a page: block sizes are multiples of 16; zero-filled past `end`).
template <int kHeadDim>
__device__ __forceinline__ void load_fp8_tile(uint8_t* k_tile, uint8_t* v_tile, float* k_scales, float* v_scales,
                                              const DecodeAttentionParams& p, const BlockWork& w, int first) {
  constexpr int kChunks = kHeadDim / 16;
  constexpr int kRowsPerPass = kThreads / kChunks;
  const int chunk = threadIdx.x % kChunks;
#pragma unroll
  for (int row = threadIdx.x / kChunks; row < kTileTokens; row += kRowsPerPass) {
    const int token = first + row;
    const bool valid = token < w.end;
    int64_t offset = 0;
    if (valid) {
      const int64_t page = w.table[token / p.block_size];
      offset = ((page * p.num_kv_heads + w.kv_head) * p.block_size + token % p.block_size) * kHeadDim + chunk * 16;
    }
    cp_async_16(k_tile + row * kHeadDim + chunk * 16, p.k_fp8 + offset, valid);
    cp_async_16(v_tile + row * kHeadDim + chunk * 16, p.v_fp8 + offset, valid);
  }
  if (threadIdx.x < 2 * kTileTokens / 4) {  // threads [0, 16): K scales, [16, 32): V scales, 4 tokens each
    const bool is_v = threadIdx.x >= kTileTokens / 4;
    const int row = (threadIdx.x % (kTileTokens / 4)) * 4, token = first + row;
    const bool valid = token < w.end;
    int64_t offset = 0;
    if (valid) {
      const int64_t page = w.table[token / p.block_size];
      offset = (page * p.num_kv_heads + w.kv_head) * p.block_size + token % p.block_size;
    }
    cp_async_16((is_v ? v_scales : k_scales) + row, (is_v ? p.v_scales : p.k_scales) + offset, valid);
  }
}

// grid (num_splits, num_kv_heads, num_decode), as decode_attention_kernel; one barrier per tile.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 3) decode_attention_fp8_kernel(DecodeAttentionParams p) {
  using Layout = Fp8Layout<kHeadDim>;
  allow_dependents();
  wait_for_producer();
  const BlockWork w = block_work(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  uint8_t* ring = shared_raw;
  float* scale_ring = reinterpret_cast<float*>(shared_raw + Layout::kRingBytes);
  __half* staging = reinterpret_cast<__half*>(shared_raw + Layout::kRingBytes + Layout::kScaleBytes) +
                    warp * Layout::kStagingElements;
  const auto k_stage = [&](int tile) { return ring + (tile % kFp8Stages) * 2 * Layout::kTileBytes; };
  const auto k_scale_stage = [&](int tile) { return scale_ring + (tile % kFp8Stages) * 2 * kTileTokens; };
  const auto load = [&](int tile) {
    load_fp8_tile<kHeadDim>(k_stage(tile), k_stage(tile) + Layout::kTileBytes, k_scale_stage(tile),
                            k_scale_stage(tile) + kTileTokens, p, w, w.begin + tile * kTileTokens);
  };

#pragma unroll
  for (int tile = 0; tile < kFp8Stages - 1; ++tile) {
    if (tile < w.num_tiles) load(tile);
    cp_async_commit();
  }
  WarpState<kHeadDim> st;
  load_query_fragments<kHeadDim>(
      st.q_frag, p.q + (static_cast<int64_t>(w.q_row) * p.num_heads + w.kv_head * w.group) * kHeadDim, w.group, lane);
  query_fragments_to_f16<kHeadDim>(st.q_frag);
  float v_reference = 0;  // this warp's O is in units of it (attend_fp8_tile)

  const float scale_log2 = p.scale * kLog2e;
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    cp_async_wait_group<kFp8Stages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                        // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kFp8Stages - 1;
    if (next < w.num_tiles) load(next);
    cp_async_commit();
    // Rows past `end` were zero-filled; stale scales past it are masked (fp8_tile_probabilities).
    attend_fp8_tile<kHeadDim>(st, v_reference, staging, k_stage(tile), k_stage(tile) + Layout::kTileBytes,
                              k_scale_stage(tile), k_scale_stage(tile) + kTileTokens, w.begin + tile * kTileTokens,
                              w.end, scale_log2, warp, lane);
    __syncwarp();  // the warp's reads of its staging tile are done before the next tile overwrites it
  }
  apply_v_reference(st, v_reference);
  cp_async_wait_all();
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(ring), warp, lane);
}

}  // namespace

void launch_decode_attention_fp8(const DecodeAttentionParams& params, cudaStream_t stream) {
  launch_fp8_decode_kernel(params, stream, [](auto dim) {
    return std::pair(decode_attention_fp8_kernel<decltype(dim)::value>, Fp8Layout<decltype(dim)::value>::kSharedBytes);
  });
}

}  // namespace qinfer::cuda
