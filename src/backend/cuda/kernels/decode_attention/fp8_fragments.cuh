// The per-warp tile step of the fp8 decode attention (fp8_cp_async.cu): tensor-core fragments built straight
// from the E4M3 bytes of the tile ring, with no staging pass through shared memory, and the products taken
// transposed so that the warp's 16 keys, not the GQA group's few query heads, are the m16 rows:
// - Sᵀ = K·Qᵀ: A = 16 keys x 16 head dims, B = 16 dims x 8 query heads (one n8 block per 8 heads of the group), so a
//   tile takes head_dim / 16 mma per head block instead of twice that with the heads padded to 16 rows, and a thread
//   holds 4 scores (2 keys x 2 heads) per head block instead of 8.
// - Oᵀ = Vᵀ·Pᵀ: A = 16 head dims x 16 keys, B = Pᵀ (16 keys x 8 heads, the score accumulators transposed in
//   registers by movmatrix), so O takes head_dim / 16 x 4 registers per head block instead of head_dim / 8 x 4.
// Both products are sums over an index that may be permuted freely, as long as both operands use the same order:
// - S sums over head dims. The A fragment gives a thread dims 2t, 2t+1, 2t+8, 2t+9 (t = lane % 4) of each 16-dim
//   step; the dims are permuted so that a thread's dims of all steps are one contiguous run of head_dim / 4 bytes of
//   its key (k_dim below), applied to the query fragments too.
// - O sums over keys, and its A fragment gives a thread two rows (head dims) of four keys. Here the rows are permuted
//   instead: row r of m-tile j is head dim output_dim(j, r), so a thread reads one contiguous run of head_dim / 8
//   bytes of each of its four keys and pairs bytes of two keys with one byte permute. The end of the block
//   (fp8_states_to_head_rows) writes O back in head-dim order.
// E4M3 -> fp16: one packed cvt per two values on sm_89+; on sm_80 by bit moves (a byte s eeee mmm placed as fp16
// s 0 eeee mmm 0000000 is exactly its value x 2^-8, subnormals included), with 256 folded into the scales.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_tile.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda::decode_block {

// Byte offset of 16-byte chunk `chunk` of key `row` in a K or V tile: the chunk index XOR-ed with the row, so that the
// fragment loads below (8 lanes reading 16 bytes each from different rows and chunks) hit distinct banks.
template <int kHeadDim>
__device__ __forceinline__ int fp8_chunk_offset(int row, int chunk) {
  constexpr int kChunks = kHeadDim / 16;
  return row * kHeadDim + ((chunk ^ (row % kChunks)) << 4);
}

// Query dim of m16n8k16 k-column `column` (0..15) of 16-dim step `step`: see the file comment.
template <int kHeadDim>
__host__ __device__ constexpr int k_dim(int step, int column) {
  return (column % 8 / 2) * (kHeadDim / 4) + step * 4 + (column / 8) * 2 + column % 2;
}

// Head dim of row `row` (0..15) of Oᵀ m-tile `tile` (0..kHeadDim / 16): see the file comment. A thread's rows r and
// r + 8 of every m-tile are the dims [r * kHeadDim / 8, (r + 1) * kHeadDim / 8), its run of V bytes.
template <int kHeadDim>
__host__ __device__ constexpr int output_dim(int tile, int row) {
  return (row % 8) * (kHeadDim / 8) + (row / 8) * (kHeadDim / 16) + tile;
}

// Compile-time checks of the two maps: each hits every head dim once.
template <int kHeadDim>
constexpr bool fragment_maps_are_permutations() {
  bool k_seen[kHeadDim] = {}, o_seen[kHeadDim] = {};
  for (int step = 0; step < kHeadDim / 16; ++step)
    for (int column = 0; column < 16; ++column) {
      const int k = k_dim<kHeadDim>(step, column), o = output_dim<kHeadDim>(step, column);
      if (k < 0 || k >= kHeadDim || k_seen[k] || o < 0 || o >= kHeadDim || o_seen[o]) return false;
      k_seen[k] = o_seen[o] = true;
    }
  return true;
}
static_assert(fragment_maps_are_permutations<64>() && fragment_maps_are_permutations<128>());

// What one fp16 code of the conversion below is worth in units of the E4M3 value.
__device__ __forceinline__ float fp8_code_unit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  return 256.0f;
#else
  return 1.0f;
#endif
}

// Bytes 2 * kHalf and 2 * kHalf + 1 of `word` as an f16x2 (low half from the lower byte), in fp8_code_unit() units.
template <int kHalf>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t word) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  const uint32_t placed = __byte_perm(word, 0u, kHalf ? 0x3424 : 0x1404);  // bytes as the high byte of each half
  return (placed & 0x80008000u) | ((placed >> 1) & 0x3F803F80u);
#else
  const __half2_raw pair =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * kHalf)), __NV_E4M3);
  return static_cast<uint32_t>(pair.x) | (static_cast<uint32_t>(pair.y) << 16);
#endif
}

// The query fragments of the GQA group as the Qᵀ B operand (k16 dims x n8 heads per 16-dim step and head block) in
// the k_dim order, as fp16: head block hb, lane: head hb * 8 + lane / 4, dims k_dim(step, 2t) + {0, 1} (register 0)
// and k_dim(step, 2t + 8) + {0, 1} (register 1); heads at or past `group` are zero. Straight from global memory.
// kShared: group_q in shared memory (the register kernel's fused RoPE stage) instead of read-only global memory.
template <int kHeadDim, int kHeadBlocks, bool kShared = false>
__device__ __forceinline__ void load_query_fragments_t(uint32_t (&q)[kHeadDim / 16][kHeadBlocks][2],
                                                       const __nv_bfloat16* group_q, int group, int lane) {
  const int column = (lane % 4) * 2;
  const auto pair = [&](int head, int dim) -> uint32_t {
    const uint32_t* at = reinterpret_cast<const uint32_t*>(group_q + head * kHeadDim + dim);
    return head >= group ? 0u : kShared ? *at : __ldg(at);
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
    for (int hb = 0; hb < kHeadBlocks; ++hb) {
      q[kk][hb][0] = bf16x2_to_f16x2(pair(hb * 8 + lane / 4, k_dim<kHeadDim>(kk, column)));
      q[kk][hb][1] = bf16x2_to_f16x2(pair(hb * 8 + lane / 4, k_dim<kHeadDim>(kk, column + 8)));
    }
}

// `kWords` consecutive 4-byte words of one key's row in a tile, from byte `first_byte` (a multiple of 8; the run never
// crosses a 16-byte chunk boundary except at chunk starts).
template <int kHeadDim, int kWords>
__device__ __forceinline__ void load_key_words(const uint8_t* tile, int row, int first_byte,
                                               uint32_t (&words)[kWords]) {
  if constexpr (kWords == 2) {
    const uint2 v =
        *reinterpret_cast<const uint2*>(tile + fp8_chunk_offset<kHeadDim>(row, first_byte / 16) + first_byte % 16);
    words[0] = v.x;
    words[1] = v.y;
  } else {
#pragma unroll
    for (int c = 0; c < kWords / 4; ++c) {
      const uint4 v = *reinterpret_cast<const uint4*>(tile + fp8_chunk_offset<kHeadDim>(row, first_byte / 16 + c));
      words[4 * c] = v.x;
      words[4 * c + 1] = v.y;
      words[4 * c + 2] = v.z;
      words[4 * c + 3] = v.w;
    }
  }
}

// One warp's step over its 16 keys with the operands built straight from E4M3 bytes: Sᵀ = code_k · Qᵀ (scores in
// fp8_code_unit() units; the caller folds the unit into scale_log2 and the final V-reference multiplication),
// probabilities with the K scale on the scores and the V scale on the probabilities (fp8_probabilities,
// fp8_tile.cuh), Oᵀ += code_vᵀ · Pᵀ in the output_dim row order. A lane's A rows are the warp's keys
// lane / 4 and lane / 4 + 8 (`first_key`: the first one's position in the sequence). Where the bytes come from:
// - key_words(half, first_step, words[4]): 16 bytes of key lane / 4 + 8 * half, from byte
//   (lane % 4) * kHeadDim / 4 + first_step * 4 of its row (first_step a multiple of 4);
// - value_words(k, words[kHeadDim / 32]): bytes [(lane / 4) * kHeadDim / 8, + kHeadDim / 8) of the warp's key
//   2 (lane % 4) + k % 2 + 8 (k / 2);
// - key_scale(half), value_scale(half): as fp8_probabilities.
template <int kHeadDim, int kHeadBlocks, typename KeyWords, typename ValueWords, typename KeyScale, typename ValueScale>
__device__ __forceinline__ void attend_fp8_keys(Fp8WarpState<kHeadDim, kHeadBlocks>& st, KeyWords key_words,
                                                ValueWords value_words, KeyScale key_scale, ValueScale value_scale,
                                                int first_key, int end, float scale_log2) {
  constexpr int kSteps = kHeadDim / 16;
  // Sᵀ: keys lane / 4 and + 8, bytes [(lane % 4) * kHeadDim / 4, + kHeadDim / 4): word kk holds
  // k_dim(kk, 2 (lane % 4) + {0, 1}) in its low half and k_dim(kk, 2 (lane % 4) + 8 + {0, 1}) in its high half. 16
  // bytes (4 steps) of both keys at a time, to bound the registers held; even and odd steps accumulate apart, halving
  // the chain of dependent mma.
  float s[2][kHeadBlocks][4] = {};
#pragma unroll
  for (int first_step = 0; first_step < kSteps; first_step += 4) {
    uint32_t k_words[2][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) key_words(half, first_step, k_words[half]);
#pragma unroll
    for (int kk = first_step; kk < first_step + 4; ++kk) {
      const uint32_t a[4] = {e4m3x2_to_f16x2<0>(k_words[0][kk % 4]), e4m3x2_to_f16x2<0>(k_words[1][kk % 4]),
                             e4m3x2_to_f16x2<1>(k_words[0][kk % 4]), e4m3x2_to_f16x2<1>(k_words[1][kk % 4])};
#pragma unroll
      for (int hb = 0; hb < kHeadBlocks; ++hb) mma_f16(s[kk % 2][hb], a, st.q[kk][hb][0], st.q[kk][hb][1]);
    }
  }
#pragma unroll
  for (int hb = 0; hb < kHeadBlocks; ++hb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][hb][e] += s[1][hb][e];

  // V: the warp's keys {2 quad, 2 quad + 1, 2 quad + 8, 2 quad + 9}, bytes [row * kHeadDim / 8, + kHeadDim / 8):
  // byte b of that run is m-tile b's row `row` for b < kHeadDim / 16, else m-tile b - kHeadDim / 16's row `row` + 8.
  constexpr int kVWords = kHeadDim / 32, kHalfWords = kVWords / 2;
  uint32_t v_words[4][kVWords];
#pragma unroll
  for (int k = 0; k < 4; ++k) value_words(k, v_words[k]);

  uint32_t p_t[kHeadBlocks][2];
  fp8_probabilities(st, s[0], key_scale, value_scale, first_key, end, scale_log2, p_t);
#pragma unroll
  for (int word = 0; word < kHalfWords; ++word) {
    // pairs[key pair][row half][byte pair]: bytes b of keys (2 quad, 2 quad + 1) or (2 quad + 8, 2 quad + 9)
    // interleaved, [k0.b0, k1.b0, k0.b1, k1.b1] and [k0.b2, k1.b2, k0.b3, k1.b3].
    uint32_t pairs[2][2][2];
#pragma unroll
    for (int key_pair = 0; key_pair < 2; ++key_pair)
#pragma unroll
      for (int row_half = 0; row_half < 2; ++row_half) {
        const uint32_t x = v_words[2 * key_pair][word + row_half * kHalfWords],
                       y = v_words[2 * key_pair + 1][word + row_half * kHalfWords];
        pairs[key_pair][row_half][0] = __byte_perm(x, y, 0x5140);
        pairs[key_pair][row_half][1] = __byte_perm(x, y, 0x7362);
      }
#pragma unroll
    for (int byte = 0; byte < 4; ++byte) {
      const auto convert = [&](uint32_t pair) {
        return byte % 2 ? e4m3x2_to_f16x2<1>(pair) : e4m3x2_to_f16x2<0>(pair);
      };
      const uint32_t a[4] = {convert(pairs[0][0][byte / 2]), convert(pairs[0][1][byte / 2]),
                             convert(pairs[1][0][byte / 2]), convert(pairs[1][1][byte / 2])};
#pragma unroll
      for (int hb = 0; hb < kHeadBlocks; ++hb) mma_f16(st.o[4 * word + byte][hb], a, p_t[hb][0], p_t[hb][1]);
    }
  }
}

// attend_fp8_keys over this warp's keys warp * 16 + [0, 16) of a tile in shared memory: the byte tiles (16-byte
// chunks swizzled by fp8_chunk_offset) and the tile's scales ([kTileTokens] each).
template <int kHeadDim, int kHeadBlocks>
__device__ __forceinline__ void attend_fp8_tile(Fp8WarpState<kHeadDim, kHeadBlocks>& st, const uint8_t* k_tile,
                                                const uint8_t* v_tile, const float* k_scales, const float* v_scales,
                                                int tile_first, int end, float scale_log2, int warp, int lane) {
  constexpr int kVWords = kHeadDim / 32;
  const int row = lane / 4, quad = lane % 4, key = warp * kWarpKeys + row;
  attend_fp8_keys(
      st,
      [&](int half, int first_step, uint32_t(&words)[4]) {
        load_key_words<kHeadDim, 4>(k_tile, key + half * 8, quad * (kHeadDim / 4) + first_step * 4, words);
      },
      [&](int k, uint32_t(&words)[kVWords]) {
        load_key_words<kHeadDim, kVWords>(v_tile, warp * kWarpKeys + (k / 2) * 8 + 2 * quad + k % 2,
                                          row * (kHeadDim / 8), words);
      },
      [&](int half) { return k_scales[key + 8 * half]; }, [&](int half) { return v_scales[key + 8 * half]; },
      tile_first + key, end, scale_log2);
}

// Where the hand-over below parks O element (head, m-tile j, A row r) of a warp in shared memory: [j][r][head] fp32
// with a head stride of kHeadBlocks * 8 and a tile stride padded by 4 words, so that both the lanes' stores (8 rows x
// 4 head pairs) and their loads in finish_block's order (8 heads x 4 dim pairs) hit distinct banks at head_dim 128
// with one head block (2-way at most otherwise).
template <int kHeadDim, int kHeadBlocks>
struct TransposedScratch {
  static constexpr int kHeadStride = kHeadBlocks * 8;
  static constexpr int kTileStride = 16 * kHeadStride + 4;
  static constexpr int kWarpFloats = kHeadDim / 16 * kTileStride;
  __device__ static int offset(int head, int tile, int row) { return tile * kTileStride + row * kHeadStride + head; }
  // The same for head dim `dim`: the inverse of output_dim.
  __device__ static int offset_of_dim(int head, int dim) {
    const int run = dim / (kHeadDim / 8), in_run = dim % (kHeadDim / 8);
    return offset(head, in_run % (kHeadDim / 16), run + 8 * (in_run / (kHeadDim / 16)));
  }
};

// The warp's transposed state handed to finish_block as a WarpState (heads as rows, head dims in order, real units):
// Oᵀ through this warp's part of `scratch` (TransposedScratch; the tile ring, which finish_block then reuses), each
// head's maximum and complete sum through `head_stats`. Call once no warp reads the tile ring any more.
template <int kHeadDim, int kHeadBlocks>
__device__ __forceinline__ WarpState<kHeadDim> fp8_states_to_head_rows(Fp8WarpState<kHeadDim, kHeadBlocks>& st,
                                                                       float* scratch,
                                                                       float (&head_stats)[kWarps][2][kGroupRows],
                                                                       int warp, int lane) {
  using Scratch = TransposedScratch<kHeadDim, kHeadBlocks>;
  static_assert(kWarps * Scratch::kWarpFloats * 4 <= Fp8Layout<kHeadDim>::kRingBytes, "must fit in the ring");
  const int row = lane / 4, quad = lane % 4;
  float* parked = scratch + warp * Scratch::kWarpFloats;
  const float to_real = st.v_reference * fp8_code_unit();
#pragma unroll
  for (int hb = 0; hb < kHeadBlocks; ++hb) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = st.row_sum[hb][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      if (row == 0) {
        head_stats[warp][0][hb * 8 + 2 * quad + h] = st.row_max[hb][h];
        head_stats[warp][1][hb * 8 + 2 * quad + h] = sum;
      }
    }
#pragma unroll
    for (int j = 0; j < kHeadDim / 16; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        *reinterpret_cast<float2*>(parked + Scratch::offset(hb * 8 + 2 * quad, j, row + 8 * half)) =
            make_float2(st.o[j][hb][2 * half] * to_real, st.o[j][hb][2 * half + 1] * to_real);
  }
  __syncwarp();
  WarpState<kHeadDim> heads;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int head = row + 8 * r;
    const bool held = head < kHeadBlocks * 8;
    heads.row_max[r] = held ? head_stats[warp][0][head] : -INFINITY;
    heads.row_sum[r] = held && quad == 0 ? head_stats[warp][1][head] : 0.0f;  // finish_block sums the row's 4 lanes
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        heads.o[nb][2 * r + c] = held ? parked[Scratch::offset_of_dim(head, nb * 8 + 2 * quad + c)] : 0.0f;
  }
  return heads;
}

}  // namespace qinfer::cuda::decode_block
