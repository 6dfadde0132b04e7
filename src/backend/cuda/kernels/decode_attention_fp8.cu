// Decode attention over the fp8 KV cache: decode_attention.cu's blocks (split-KV, GQA group on tensor cores, in-kernel
// merge) reading E4M3 tiles and their scales, half the bytes of bf16. 64-key tiles of fp8 bytes and scales stream
// through a cp.async ring. Each warp converts its own 16 keys' bytes to fp16 (one packed cvt per two values; every
// E4M3 value is exact in fp16) into a per-warp staging tile, and multiplies on fp16 tensor cores with the scales
// folded in where they cost least: a key's K scale multiplies its score, its V scale its probability. Scaling every
// element instead (bf16(float(byte) * scale), then the bf16 tile step) made the kernel instruction-bound at the bf16
// kernel's speed (docs/CUDA_NOTES.md).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// Three stages and one staging tile per warp (K, then V) keep a block at 65.5 KB of shared memory, so three blocks
// fit on an SM: the loop is bound by each tile's chain of dependent steps, and more resident blocks hide it.
constexpr int kFp8Stages = 3;
constexpr int kWarpKeys = kTileTokens / kWarps;  // 16 keys of a tile per warp

// Shared memory: the fp8 ring [kFp8Stages][K|V][kTileTokens][kHeadDim] bytes, the scale ring
// [kFp8Stages][K|V][kTileTokens] fp32, and the staging tiles [kWarps][kWarpKeys][kHeadDim] fp16 (swizzled).
template <int kHeadDim>
struct Fp8Layout {
  static constexpr int kTileBytes = kTileTokens * kHeadDim;  // one K or V tile of bytes
  static constexpr int kRingBytes = kFp8Stages * 2 * kTileBytes;
  static constexpr int kScaleBytes = kFp8Stages * 2 * kTileTokens * 4;
  static constexpr int kStagingElements = kWarpKeys * kHeadDim;  // one warp's staging tile
  static constexpr int kStagingBytes = kWarps * kStagingElements * 2;
  static constexpr int kSharedBytes = kRingBytes + kScaleBytes + kStagingBytes;
};

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

// 16 E4M3 values as 16 fp16 (two 16-byte chunks), exactly: packed fp8x2 -> f16x2 conversions.
__device__ __forceinline__ void fp8x16_to_f16(const uint4& bytes, uint4 (&out)[2]) {
  const uint32_t words[4] = {bytes.x, bytes.y, bytes.z, bytes.w};
  uint32_t* packed = reinterpret_cast<uint32_t*>(out);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const __half2_raw pair =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[i] >> (16 * half)), __NV_E4M3);
      packed[2 * i + half] = static_cast<uint32_t>(pair.x) | (static_cast<uint32_t>(pair.y) << 16);
    }
}

// This warp's 16 keys of a K or V tile of bytes into its staging tile [kWarpKeys][kHeadDim] fp16, swizzled as
// swizzle<>().
template <int kHeadDim>
__device__ __forceinline__ void stage_warp_keys(const uint8_t* tile, __half* staging, int warp, int lane) {
  constexpr int kChunks = kHeadDim / 16;  // 16-byte fp8 chunks per key
#pragma unroll
  for (int index = lane; index < kWarpKeys * kChunks; index += 32) {
    const int row = index / kChunks, chunk = index % kChunks;
    uint4 values[2];
    fp8x16_to_f16(*reinterpret_cast<const uint4*>(tile + (warp * kWarpKeys + row) * kHeadDim + chunk * 16), values);
    *reinterpret_cast<uint4*>(staging + swizzle<kHeadDim>(row, 2 * chunk)) = values[0];
    *reinterpret_cast<uint4*>(staging + swizzle<kHeadDim>(row, 2 * chunk + 1)) = values[1];
  }
}

// The query fragments as fp16: exact for bf16 values inside fp16's range (normalised, rotated queries are far inside).
template <int kHeadDim>
__device__ __forceinline__ void query_fragments_to_f16(uint32_t (&q_frag)[kHeadDim / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q_frag[kk][i]));
      q_frag[kk][i] = pack_f16(pair.x, pair.y);
    }
}

// attend_tile over fp16 codes of this warp's 16 keys of a tile (`k_tile`, `v_tile`: the tile's bytes), staged one
// after the other in `staging`: score = (q . code_k) * scale_k; O += p * scale_v * code_v. To keep p * scale_v within
// [0, 1] (fp16), the warp's O is held in units of `v_reference`, the largest V scale it has seen: when a tile raises
// it, O is rescaled once; the caller multiplies O by it at the end. This thread's keys are
// warp * 16 + nb * 8 + 2 * (lane % 4) + {0, 1}, nb in {0, 1}.
template <int kHeadDim>
__device__ __forceinline__ void attend_fp8_tile(WarpState<kHeadDim>& st, float& v_reference, __half* staging,
                                                const uint8_t* k_tile, const uint8_t* v_tile, const float* k_scales,
                                                const float* v_scales, int tile_first, int end, float scale_log2,
                                                int warp, int lane) {
  stage_warp_keys<kHeadDim>(k_tile, staging, warp, lane);
  __syncwarp();
  float s[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t b[4];
    ldmatrix_x4(b, staging + swizzle<kHeadDim>((lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
    mma_f16(s[0], st.q_frag[kk], b[0], b[1]);
    mma_f16(s[1], st.q_frag[kk], b[2], b[3]);
  }
  __syncwarp();  // the K codes are read: V's take their place
  stage_warp_keys<kHeadDim>(v_tile, staging, warp, lane);
  float2 k_scale[2], v_scale[2];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    const int key = warp * kWarpKeys + nb * 8 + (lane % 4) * 2;
    k_scale[nb] = *reinterpret_cast<const float2*>(k_scales + key);
    v_scale[nb] = *reinterpret_cast<const float2*>(v_scales + key);
  }
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = tile_first + warp * kWarpKeys + nb * 8 + (lane % 4) * 2 + (e % 2);
      const float value = key < end ? s[nb][e] * (e % 2 ? k_scale[nb].y : k_scale[nb].x) * scale_log2 : -INFINITY;
      s[nb][e] = value;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], value);
    }
  online_softmax_step(s, tile_max, st.row_max, st.row_sum, st.o);

  float tile_v_max = fmaxf(fmaxf(v_scale[0].x, v_scale[0].y), fmaxf(v_scale[1].x, v_scale[1].y));
  tile_v_max = fmaxf(tile_v_max, __shfl_xor_sync(0xffffffffu, tile_v_max, 1));
  tile_v_max = fmaxf(tile_v_max, __shfl_xor_sync(0xffffffffu, tile_v_max, 2));  // over the warp's 16 keys
  if (tile_v_max > v_reference) {                                               // the same in every lane
    const float ratio = v_reference / tile_v_max;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[nb][e] *= ratio;
    v_reference = tile_v_max;
  }
  const float inverse = v_reference > 0 ? 1.0f / v_reference : 0.0f;
  const float v0 = v_scale[0].x * inverse, v1 = v_scale[0].y * inverse, v2 = v_scale[1].x * inverse,
              v3 = v_scale[1].y * inverse;
  __syncwarp();
  const uint32_t a[4] = {pack_f16(s[0][0] * v0, s[0][1] * v1), pack_f16(s[0][2] * v0, s[0][3] * v1),
                         pack_f16(s[1][0] * v2, s[1][1] * v3), pack_f16(s[1][2] * v2, s[1][3] * v3)};
#pragma unroll
  for (int pair = 0; pair < kHeadDim / 16; ++pair) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, staging + swizzle<kHeadDim>((lane % 8) + ((lane / 8) % 2) * 8, pair * 2 + lane / 16));
    mma_f16(st.o[2 * pair], a, b[0], b[1]);
    mma_f16(st.o[2 * pair + 1], a, b[2], b[3]);
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
    // Rows past `end` were zero-filled (bytes and scales), so they hold finite zeros.
    attend_fp8_tile<kHeadDim>(st, v_reference, staging, k_stage(tile), k_stage(tile) + Layout::kTileBytes,
                              k_scale_stage(tile), k_scale_stage(tile) + kTileTokens, w.begin + tile * kTileTokens,
                              w.end, scale_log2, warp, lane);
    __syncwarp();  // the warp's reads of its staging tile are done before the next tile overwrites it
  }
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[nb][e] *= v_reference;
  cp_async_wait_all();
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(ring), warp, lane);
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionParams& p, cudaStream_t stream) {
  using Layout = Fp8Layout<kHeadDim>;
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= Layout::kRingBytes, "merge scratch must fit in the ring");
  constexpr int kShared = Layout::kSharedBytes;
  const auto kernel = decode_attention_fp8_kernel<kHeadDim>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  launch_dependent(kernel, dim3(p.num_splits, p.num_kv_heads, p.num_decode), kThreads, kShared, stream, p);
}

}  // namespace

void launch_decode_attention_fp8(const DecodeAttentionParams& params, cudaStream_t stream) {
  QINFER_CHECK(params.k_fp8 != nullptr && params.v_fp8 != nullptr && params.k_scales != nullptr &&
               params.v_scales != nullptr && params.block_size % 16 == 0);
  if (params.num_decode == 0) return;
  with_head_dim(params.head_dim, [&](auto dim) { launch_for_head_dim<decltype(dim)::value>(params, stream); });
}

}  // namespace qinfer::cuda
