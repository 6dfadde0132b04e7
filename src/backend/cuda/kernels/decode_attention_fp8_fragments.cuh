// The per-warp tile step of the fp8 decode attention (decode_attention_fp8.cu): tensor-core fragments built straight
// from the E4M3 bytes of the tile ring, with no staging pass through shared memory.
//
// Both products are sums over an index that may be permuted freely, as long as both operands use the same order:
// - S = Q·Kᵀ sums over head dims. m16n8k16's B fragment gives a thread dims 2t, 2t+1, 2t+8, 2t+9 (t = lane % 4) of
//   each 16-dim step; the dims are permuted so that a thread's dims of all steps are one contiguous run of
//   head_dim / 4 bytes of its key (k_dim below), applied to the query fragments too.
// - O = P·V sums over keys, but its B fragment gives a thread one dim (n = lane / 4) of four keys. Here the output
//   dims are permuted instead: output column n of n-block j is dim n * (head_dim / 8) + j (output_dim below), so a
//   thread reads one contiguous run of head_dim / 8 bytes of each of its four keys and pairs bytes of two keys with
//   one byte permute. finish_block reads O through the inverse map (PermutedColumns).
// E4M3 -> fp16: one packed cvt per two values on sm_89+; on sm_80 by bit moves (a byte s eeee mmm placed as fp16
// s 0 eeee mmm 0000000 is exactly its value x 2^-8, subnormals included), with 256 folded into the scales.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/decode_attention_block.cuh"
#include "backend/cuda/kernels/decode_attention_fp8_tile.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda::decode_block {

// Shared memory of the fp8 kernel: the fp8 ring [kFp8Stages][K|V][kTileTokens][kHeadDim] bytes (16-byte chunks
// swizzled by fp8_chunk_offset), the scale ring [kFp8Stages][K|V][kTileTokens] fp32 and the query fragments
// [kHeadDim / 16][32 lanes] uint4 (the same for every warp). No staging tiles, so a head_dim 128 block takes 53.5 KB
// and four blocks fit on an SM; the query fragments are read from shared memory each tile rather than held in 32
// registers, which keeps the kernel within 128 registers (four blocks of 128 threads) without spills.
template <int kHeadDim>
struct Fp8Layout {
  static constexpr int kTileBytes = kTileTokens * kHeadDim;
  static constexpr int kRingBytes = kFp8Stages * 2 * kTileBytes;
  static constexpr int kScaleBytes = kFp8Stages * 2 * kTileTokens * 4;
  static constexpr int kQueryBytes = kHeadDim / 16 * 32 * 16;
  static constexpr int kSharedBytes = kRingBytes + kScaleBytes + kQueryBytes;
  static constexpr int kBlocksPerSm = 4;  // its __launch_bounds__: at most 128 registers per thread
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= kRingBytes, "finish_block's merge scratch must fit in the ring");
};

// Byte offset of 16-byte chunk `chunk` of key `row` in a K or V tile: the chunk index XOR-ed with the row, so that the
// fragment loads below (8 lanes reading 16 bytes each from different rows and chunks) hit distinct banks.
template <int kHeadDim>
__device__ __forceinline__ int fp8_chunk_offset(int row, int chunk) {
  constexpr int kChunks = kHeadDim / 16;
  return row * kHeadDim + ((chunk ^ (row % kChunks)) << 4);
}

// Query dim of m16n8k16 column `column` (0..15) of 16-dim step `step`: see the file comment.
template <int kHeadDim>
__host__ __device__ constexpr int k_dim(int step, int column) {
  return (column % 8 / 2) * (kHeadDim / 4) + step * 4 + (column / 8) * 2 + column % 2;
}

// Head dim of column `column` (0..7) of output n-block `block`: see the file comment.
template <int kHeadDim>
__host__ __device__ constexpr int output_dim(int block, int column) {
  return column * (kHeadDim / 8) + block;
}

// The inverse of output_dim: the O accumulator column (n-block * 8 + column) that holds head dim `dim`.
template <int kHeadDim>
struct PermutedColumns {
  __host__ __device__ constexpr int operator()(int dim) const {
    return dim % (kHeadDim / 8) * 8 + dim / (kHeadDim / 8);
  }
};

// Compile-time checks of the three maps: k_dim hits every dim once, PermutedColumns inverts output_dim.
template <int kHeadDim>
constexpr bool fragment_maps_are_permutations() {
  bool seen[kHeadDim] = {};
  for (int step = 0; step < kHeadDim / 16; ++step)
    for (int column = 0; column < 16; ++column) {
      const int dim = k_dim<kHeadDim>(step, column);
      if (dim < 0 || dim >= kHeadDim || seen[dim]) return false;
      seen[dim] = true;
    }
  for (int block = 0; block < kHeadDim / 8; ++block)
    for (int column = 0; column < 8; ++column)
      if (PermutedColumns<kHeadDim>{}(output_dim<kHeadDim>(block, column)) != block * 8 + column) return false;
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

// The query fragments of the GQA group (m16 x k16 A operand per 16-dim step) in the k_dim order, as fp16: a
// thread's two columns of a half step are dims k_dim(step, 2t) and k_dim(step, 2t) + 1, one 4-byte load.
template <int kHeadDim>
__device__ __forceinline__ void load_permuted_query_fragments(uint32_t (&q_frag)[kHeadDim / 16][4],
                                                              const __nv_bfloat16* group_q, int group, int lane) {
  const int row = lane / 4, column = (lane % 4) * 2;
  const auto pair = [&](int r, int dim) -> uint32_t {
    return r < group ? __ldg(reinterpret_cast<const uint32_t*>(group_q + r * kHeadDim + dim)) : 0u;
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    q_frag[kk][0] = pair(row, k_dim<kHeadDim>(kk, column));
    q_frag[kk][1] = pair(row + 8, k_dim<kHeadDim>(kk, column));
    q_frag[kk][2] = pair(row, k_dim<kHeadDim>(kk, column + 8));
    q_frag[kk][3] = pair(row + 8, k_dim<kHeadDim>(kk, column + 8));
  }
  query_fragments_to_f16<kHeadDim>(q_frag);
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

// One tile's step with its operands read straight from the byte tiles: score = (q . code_k) * scale_k,
// O += p * scale_v * code_v (fp8_tile_probabilities, decode_attention_fp8_tile.cuh), over this warp's keys
// warp * 16 + [0, 16) of the tile; scores in fp8_code_unit() units of the query · K value (the caller folds the unit
// into scale_log2 and v_reference's final multiplication). O accumulates in the output_dim column order.
// `q_fragments`: [kHeadDim / 16][32 lanes] the query fragments of load_permuted_query_fragments.
template <int kHeadDim>
__device__ __forceinline__ void attend_fp8_tile(WarpState<kHeadDim>& st, float& v_reference, const uint4* q_fragments,
                                                const uint8_t* k_tile, const uint8_t* v_tile, const float* k_scales,
                                                const float* v_scales, int tile_first, int end, float scale_log2,
                                                int warp, int lane) {
  constexpr int kSteps = kHeadDim / 16;
  const int key_in_block = lane / 4, quad = lane % 4;
  // S: a thread's keys warp * 16 + nb * 8 + lane / 4, bytes [quad * kHeadDim / 4, + kHeadDim / 4): word kk holds
  // k_dim(kk, 2 quad + {0, 1}) in its low half and k_dim(kk, 2 quad + 8 + {0, 1}) in its high half. Read 16 bytes
  // (4 steps) of both keys at a time, to bound the registers held.
  float s[2][4] = {};
#pragma unroll
  for (int first_step = 0; first_step < kSteps; first_step += 4) {
    uint32_t k_words[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
      load_key_words<kHeadDim, 4>(k_tile, warp * kWarpKeys + nb * 8 + key_in_block,
                                  quad * (kHeadDim / 4) + first_step * 4, k_words[nb]);
#pragma unroll
    for (int kk = first_step; kk < first_step + 4; ++kk) {
      const uint4 q = q_fragments[kk * 32 + lane];
      const uint32_t a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
        mma_f16(s[nb], a, e4m3x2_to_f16x2<0>(k_words[nb][kk % 4]), e4m3x2_to_f16x2<1>(k_words[nb][kk % 4]));
    }
  }

  // V: keys warp * 16 + {2 quad, 2 quad + 1, 2 quad + 8, 2 quad + 9}, bytes [n * kHeadDim / 8, + kHeadDim / 8) with
  // n = lane / 4: byte j of that run is output n-block j's column n.
  constexpr int kVWords = kHeadDim / 32;
  uint32_t v_words[4][kVWords];
#pragma unroll
  for (int key = 0; key < 4; ++key)
    load_key_words<kHeadDim, kVWords>(v_tile, warp * kWarpKeys + (key / 2) * 8 + 2 * quad + key % 2,
                                      key_in_block * (kHeadDim / 8), v_words[key]);

  uint32_t a[4];
  fp8_tile_probabilities<kHeadDim>(st, v_reference, s, k_scales, v_scales, tile_first, end, scale_log2, warp, lane, a);
#pragma unroll
  for (int word = 0; word < kVWords; ++word) {
    // Bytes b of keys (2 quad, 2 quad + 1) interleaved: [k0.b0, k1.b0, k0.b1, k1.b1] and [k0.b2, k1.b2, k0.b3, k1.b3].
    const uint32_t low_pairs[2] = {__byte_perm(v_words[0][word], v_words[1][word], 0x5140),
                                   __byte_perm(v_words[0][word], v_words[1][word], 0x7362)};
    const uint32_t high_pairs[2] = {__byte_perm(v_words[2][word], v_words[3][word], 0x5140),
                                    __byte_perm(v_words[2][word], v_words[3][word], 0x7362)};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int block = 4 * word + 2 * half;
      mma_f16(st.o[block], a, e4m3x2_to_f16x2<0>(low_pairs[half]), e4m3x2_to_f16x2<0>(high_pairs[half]));
      mma_f16(st.o[block + 1], a, e4m3x2_to_f16x2<1>(low_pairs[half]), e4m3x2_to_f16x2<1>(high_pairs[half]));
    }
  }
}

}  // namespace qinfer::cuda::decode_block
