// Hopper (sm_90a) causal prefill attention straight over the fp8 KV cache, FlashAttention-3's FP8 path on the bf16
// kernel's structure (prefill_attention_sm90.cu; head_dim 128: one key is one 128-byte swizzled row). Producer warps:
// warp 0 copies K tiles of 128 keys through the block table (one bulk tensor copy box of 16 keys per page lookup) with
// their K and V scales (64-byte bulk copies), warp 1 the V tiles, warps 2-3 transpose each V tile in shared memory,
// since 8-bit wgmma reads B only K-major and P·V reduces over keys. Two consumer warpgroups of 64 query rows quantise
// their Q rows to E4M3 (per (token, head) row, the cache's quantiser: scale amax / 448), run S = Q·Kᵀ as fp8 wgmma,
// turn S into true scores with the row's Q scale and the column's K scale, run the online softmax in fp32 (row sums of
// the unrounded probabilities), fold V's per-key scales into P (P'[r][j] = P[r][j] · v_scale[j] / u[r], u[r] the
// largest V scale among the keys row r has seen so far over 448, so that P' ∈ [0, 448]), round P' to E4M3 as the
// register A operand and accumulate O += P'·Vᵀ, row r in units of u[r] (rescaled when u[r] grows, with the softmax
// correction).
// Scores of tile t + 1 and P·V of tile t overlap as in the bf16 kernel. docs/CUDA_DESIGN.md, "Prefill attention".
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/prefill_attention_sm90.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"
#include "backend/cuda/kernels/tensor_map.h"

namespace qinfer::cuda {

namespace {

using namespace prefill_sm90;

constexpr int kHeadDim = 128;
constexpr int kStages = 3;                      // K, V and Vᵀ tiles in flight or in use
constexpr int kTileBytes = kBlockN * kHeadDim;  // one E4M3 tile, 16 KB

// Shared memory, tiles at 1024-byte boundaries (where the 128-byte swizzle pattern repeats): per stage the K tile
// [kBlockN keys][128 bytes], the transposed V tile Vᵀ [kHeadDim dims][kBlockN keys] and the V tile as copied
// [kBlockN keys][128 bytes]; then [kConsumers] Q tiles [64 rows][128 bytes], the scales [kStages][K | V][kBlockN]
// fp32 and the barriers (Fp8Barriers).
struct SharedLayout {
  static constexpr int kKOffset = 0;
  static constexpr int kVtOffset = kKOffset + kTileBytes;
  static constexpr int kVCopyOffset = kVtOffset + kTileBytes;
  static constexpr int kStageBytes = kVCopyOffset + kTileBytes;
  static constexpr int kQBytes = 64 * kHeadDim;
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kScaleStageBytes = 2 * kBlockN * 4;
  static constexpr int kScaleOffset = kQOffset + kConsumers * kQBytes;
  static constexpr int kBarrierOffset = kScaleOffset + kStages * kScaleStageBytes;
  static constexpr int kBytes = kBarrierOffset + 6 * kStages * 8 + 1024;  // + slack to align the start to 1024
};
static_assert(SharedLayout::kBytes <= 227 * 1024, "one block per SM must fit");

// Per stage: full barriers complete when the data has landed (the copying warp's arrival and the transaction bytes, or
// the transposing warps' arrivals), empty barriers when every warp that reads the slot has finished with it.
struct Fp8Barriers {
  uint64_t* full_k;        // [kStages] K tile and the tile's K and V scales
  uint64_t* empty_k;       // [kStages] the consumer warps (the scales are read until the tile's P' is formed)
  uint64_t* full_v_copy;   // [kStages] V tile as copied
  uint64_t* empty_v_copy;  // [kStages] the transposing warps
  uint64_t* full_vt;       // [kStages] Vᵀ written by the transposing warps
  uint64_t* empty_vt;      // [kStages] the consumer warps
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kGroups = kBlockN / 16;  // 16-key groups of a tile: one box and one page lookup each
constexpr int kBoxBytes = 16 * kHeadDim;
constexpr int kScaleBoxBytes = 16 * 4;
constexpr int kTransposeWarps = 2;
constexpr float kFp8Max = 448.0f;
// The V reference before any V scale was seen: O is 0 then, and 448 / kInitialVScale stays finite.
constexpr float kInitialVScale = 1e-30f;

// As in the bf16 kernel: every thread has 168 registers at entry, and the warpgroups' counts must fit in that.
constexpr int kProducerRegisters = 56;
constexpr int kConsumerRegisters = 224;
constexpr int kEntryRegisters = 65536 / kThreads / 8 * 8;
static_assert(kWarpgroupThreads * kProducerRegisters + kConsumers * kWarpgroupThreads * kConsumerRegisters <=
                  kThreads * kEntryRegisters,
              "the warpgroups' register counts exceed the block's allocation: setmaxnreg.inc would never return");

// Four floats rounded to E4M3 (nearest even, saturating at 448) as the bytes 0-3 of a register.
__device__ __forceinline__ uint32_t pack_e4m3x4(float b0, float b1, float b2, float b3) {
  uint16_t low, high;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(low) : "f"(b1), "f"(b0));  // first source: upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(high) : "f"(b3), "f"(b2));
  return static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
}

// Warp 0 (copies_k) or 1 of the producer warpgroup: tile t into stage t % kStages once the stage's slot is free. Lane
// g < kGroups copies 16-key group g as one box of the [pool rows][128 bytes] map (the block size is a multiple of 16,
// so a group lies in one cache block), and warp 0 also the group's 16 K and 16 V scales (contiguous in their pools,
// 64-byte aligned). Groups that start at or past the context are not copied (their table entries need not exist); the
// rest of the tile keeps stale bytes, which the consumers mask (K) and the transposing warps zero (V). The page of the
// next tile's group is looked up before waiting for its slot.
__device__ __forceinline__ void copy_tiles(const PrefillAttentionParams& p, const CUtensorMap* map, const TileRange& r,
                                           unsigned char* shared, const Fp8Barriers& b, bool copies_k) {
  using Layout = SharedLayout;
  const int lane = threadIdx.x % 32;
  uint64_t* full = copies_k ? b.full_k : b.full_v_copy;
  uint64_t* empty = copies_k ? b.empty_k : b.empty_v_copy;
  const uint32_t tiles_address = sm90::shared_address(shared) + (copies_k ? Layout::kKOffset : Layout::kVCopyOffset);
  const uint32_t scales_address = sm90::shared_address(shared + Layout::kScaleOffset);
  const uint32_t group_bytes = copies_k ? kBoxBytes + 2 * kScaleBoxBytes : kBoxBytes;
  const int kv_head = r.head / (p.num_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(p.table_rows[r.seq]) * p.block_table_stride;
  const auto groups_in = [&](int tile) { return min(kGroups, (r.context_len - tile * kBlockN + 15) / 16); };
  // Row of the [blocks * kv_heads * block_size, 128] cache matrix of this lane's group of `tile`.
  const auto group_row = [&](int tile) {
    if (lane >= groups_in(tile)) return 0;
    const int token = tile * kBlockN + lane * 16;
    return (table[token / p.block_size] * p.num_kv_heads + kv_head) * p.block_size + token % p.block_size;
  };
  int row = group_row(0);
  for (int tile = 0; tile < r.num_tiles; ++tile) {
    const int stage = tile % kStages;
    if (tile >= kStages) sm90::mbarrier_wait_suspending(&empty[stage], (tile / kStages - 1) & 1);
    const int groups = groups_in(tile);
    if (lane == 0) sm90::mbarrier_arrive_expect_tx(&full[stage], groups * group_bytes);
    __syncwarp();
    if (lane < groups) {
      sm90::tma_load_2d(tiles_address + stage * Layout::kStageBytes + lane * kBoxBytes, map, 0, row, &full[stage]);
      if (copies_k) {
        const uint32_t scale_box = scales_address + stage * Layout::kScaleStageBytes + lane * kScaleBoxBytes;
        sm90::bulk_copy(scale_box, p.k_scales + row, kScaleBoxBytes, &full[stage]);
        sm90::bulk_copy(scale_box + kBlockN * 4, p.v_scales + row, kScaleBoxBytes, &full[stage]);
      }
    }
    if (tile + 1 < r.num_tiles) row = group_row(tile + 1);
  }
}

// 4 x 4 bytes transposed: byte i of out[j] = byte j of in[i].
__device__ __forceinline__ void transpose_4x4_bytes(const uint32_t (&in)[4], uint32_t (&out)[4]) {
  const uint32_t low01 = __byte_perm(in[0], in[1], 0x5140), high01 = __byte_perm(in[0], in[1], 0x7362);
  const uint32_t low23 = __byte_perm(in[2], in[3], 0x5140), high23 = __byte_perm(in[2], in[3], 0x7362);
  out[0] = __byte_perm(low01, low23, 0x5410);
  out[1] = __byte_perm(low01, low23, 0x7632);
  out[2] = __byte_perm(high01, high23, 0x5410);
  out[3] = __byte_perm(high01, high23, 0x7632);
}

// Transposing warp `transposer` (0 or 1; head dims [64 transposer, 64 transposer + 64)) of each V tile: V [key][dim]
// as copied to Vᵀ [dim][key], both 128-byte swizzled, keys past the context written as 0 (a stale slot may hold NaN,
// and P' = 0 times NaN is NaN). Vᵀ's keys are permuted within each 32-key step so that the consumers' P accumulator
// registers are the A operand as they are: 32-bit word w of a Vᵀ row holds the keys whose probabilities lane
// w % 4 holds in A's k positions 4 (w % 4) + 0..3 of step w / 8, namely keys 16 (w / 4) + 2 (w % 4) + {0, 1, 8, 9}
// (the accumulator layout gives lane l the keys 8 b + 2 (l % 4) + {0, 1} of each n8 block b). Lane l moves 4 x 4-byte
// blocks: keys of word w = 4 (l / 4) + l % 4, dims d0 = 4 y + 32 z with y = (l / 4 + rotation) % 8, one 32-bit load
// from each key's row and one 32-bit store to each dim's row; with the swizzle, the 32 lanes of every load and every
// store fall into 32 different banks.
__device__ __forceinline__ void transpose_v_tiles(const TileRange& r, unsigned char* shared, const Fp8Barriers& b,
                                                  int transposer) {
  using Layout = SharedLayout;
  const int lane = threadIdx.x % 32, t = lane % 4, x = lane / 4;
  int key[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) key[j] = 16 * x + 2 * t + (j % 2) + 8 * (j / 2);
  for (int tile = 0; tile < r.num_tiles; ++tile) {
    const int stage = tile % kStages;
    if (tile >= kStages) sm90::mbarrier_wait_suspending(&b.empty_vt[stage], (tile / kStages - 1) & 1);
    sm90::mbarrier_wait_suspending(&b.full_v_copy[stage], (tile / kStages) & 1);
    const unsigned char* v = shared + stage * Layout::kStageBytes + Layout::kVCopyOffset;
    unsigned char* vt = shared + stage * Layout::kStageBytes + Layout::kVtOffset;
    const int valid_keys = r.context_len - tile * kBlockN;
#pragma unroll 1
    for (int half = 0; half < 2; ++half) {
      const int z = 2 * transposer + half;
#pragma unroll 4
      for (int rotation = 0; rotation < 8; ++rotation) {
        const int d0 = 4 * ((x + rotation) % 8) + 32 * z;
        uint32_t in[4], out[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          in[j] = *reinterpret_cast<const uint32_t*>(v + key[j] * 128 + (((d0 >> 4) ^ (key[j] & 7)) << 4) + (d0 & 15));
          if (key[j] >= valid_keys) in[j] = 0;
        }
        transpose_4x4_bytes(in, out);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int dim = d0 + i;
          *reinterpret_cast<uint32_t*>(vt + dim * 128 + ((x ^ (dim & 7)) << 4) + 4 * t) = out[i];
        }
      }
    }
    sm90::fence_proxy_async_shared();  // these generic-proxy writes, then read by the tensor cores
    __syncwarp();
    if (lane == 0) {
      sm90::mbarrier_arrive(&b.full_vt[stage]);
      sm90::mbarrier_arrive(&b.empty_v_copy[stage]);
    }
  }
}

// This warp's 16 rows of the consumer's Q tile ([64][128] E4M3, 128-byte swizzled; `rows` points at the warp's first
// row) quantised as the cache quantises a vector (quantize_fp8_e4m3_vector: the same two fp32 operations), rows past
// the new tokens as zeros. `scale` receives the scales of this thread's accumulator rows lane / 4 and lane / 4 + 8.
__device__ __forceinline__ void quantize_query_rows(const PrefillAttentionParams& p, const TileRange& r, int first_row,
                                                    unsigned char* rows, float (&scale)[2]) {
  const int lane = threadIdx.x % 32;
  uint2 loaded[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int q_index = first_row + i;
    loaded[i] = make_uint2(0, 0);
    if (q_index < r.q_len)
      loaded[i] = *reinterpret_cast<const uint2*>(
          p.q + (static_cast<int64_t>(r.q_start + q_index) * p.num_heads + r.head) * kHeadDim + 4 * lane);
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float2 x01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&loaded[i].x));
    const float2 x23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&loaded[i].y));
    float amax = fmaxf(fmaxf(fabsf(x01.x), fabsf(x01.y)), fmaxf(fabsf(x23.x), fabsf(x23.y)));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    const float inverse = amax > 0 ? kFp8Max / amax : 0.0f;
    const auto code = [&](float value) -> uint32_t {
      return __nv_cvt_float_to_fp8(value * inverse, __NV_SATFINITE, __NV_E4M3);
    };
    const uint32_t bytes = code(x01.x) | (code(x01.y) << 8) | (code(x23.x) << 16) | (code(x23.y) << 24);
    *reinterpret_cast<uint32_t*>(rows + i * 128 + (((lane / 4) ^ (i & 7)) << 4) + (lane % 4) * 4) = bytes;
    // An all-zero row (codes 0) takes scale 1: its scores are 0 either way, and masked ones stay -inf (not 0 * -inf).
    const float row_scale = amax > 0 ? amax / kFp8Max : 1.0f;
    if (i == lane / 4) scale[0] = row_scale;
    if (i == lane / 4 + 8) scale[1] = row_scale;
  }
}

// Consumer warpgroup `consumer`: query rows [64 * consumer, 64 * consumer + 64) of the block.
__device__ __forceinline__ void consume_kv_tiles(const PrefillAttentionParams& p, const TileRange& r, int consumer,
                                                 unsigned char* shared, const Fp8Barriers& b) {
  using Layout = SharedLayout;
  constexpr int kDimBlocks = kHeadDim / 8;  // n8 blocks of the output
  const int thread = threadIdx.x % kWarpgroupThreads, warp = thread / 32, lane = thread % 32;
  const int first_q = r.m_block * kBlockM + consumer * 64;

  unsigned char* q_tile = shared + Layout::kQOffset + consumer * Layout::kQBytes;
  float q_scale[2] = {0, 0};
  quantize_query_rows(p, r, first_q + warp * 16, q_tile + warp * 16 * 128, q_scale);
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(1 + consumer, kWarpgroupThreads);

  // This thread's rows: warp * 16 + lane / 4 and 8 further (the accumulator layout); its keys of a tile:
  // 8 * block + 2 * (lane % 4) + {0, 1}.
  const int row_base = warp * 16 + lane / 4;
  const int position[2] = {r.cached + first_q + row_base, r.cached + first_q + row_base + 8};
  const int first_position = r.cached + first_q;  // tiles entirely at or before it need no causal mask
  const float row_scale[2] = {q_scale[0] * p.scale * kLog2e, q_scale[1] * p.scale * kLog2e};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  float o[kDimBlocks][4] = {};                              // row i in units of v_reference[i] / 448
  float v_reference[2] = {kInitialVScale, kInitialVScale};  // each row's largest V scale of the keys it saw so far
  const auto stage_address = [&](int tile) {
    return sm90::shared_address(shared + (tile % kStages) * Layout::kStageBytes);
  };
  const auto tile_scales = [&](int tile) {
    return reinterpret_cast<const float*>(shared + Layout::kScaleOffset + (tile % kStages) * Layout::kScaleStageBytes);
  };
  float s[kBlockN / 8][4];
  const auto wait_for = [&](uint64_t* full, int tile) {
    sm90::mbarrier_wait_suspending(&full[tile % kStages], (tile / kStages) & 1);
  };
  // One arrival per warp: wgmma.wait_group is warp-synchronous, so the whole warp is past its reads of the slot.
  const auto release = [&](uint64_t* empty, int tile) {
    if (lane == 0) sm90::mbarrier_arrive(&empty[tile % kStages]);
  };
  const uint64_t q_descriptor = sm90::swizzled_descriptor(sm90::shared_address(q_tile), 16);
  // S [64 x kBlockN] = Q Kᵀ in code units (times the row's Q scale and the key's K scale: the score), 32 dims a step.
  const auto issue_scores = [&](int tile) {
    const uint64_t k_descriptor = sm90::swizzled_descriptor(stage_address(tile) + Layout::kKOffset, 16);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 32; ++kk)
      sm90::wgmma_m64n128k32_e4m3_ss(s, sm90::advance_descriptor(q_descriptor, kk * 32),
                                     sm90::advance_descriptor(k_descriptor, kk * 32), kk == 0);
    sm90::wgmma_commit();
  };
  // O += P' Vᵀ for a tile, 32 keys per step: P's accumulator blocks 4kk..4kk+3 are the A fragment of step kk.
  uint32_t p_frag[kBlockN / 32][4];
  const auto issue_values = [&](int tile) {
    const uint64_t vt_descriptor = sm90::swizzled_descriptor(stage_address(tile) + Layout::kVtOffset, 16);
    sm90::wgmma_fence_operands(o);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 32; ++kk)
      sm90::wgmma_m64n128k32_e4m3_rs(o, p_frag[kk], sm90::advance_descriptor(vt_descriptor, kk * 32));
    sm90::wgmma_commit();
  };
  // The scores of a tile into P' (in place) and the factor for O accumulated so far. The tile's scales are read while
  // its K slot is held; keys past the context have their V scales taken as 0 (their slots may hold NaN).
  const auto probabilities = [&](int tile, float(&o_factor)[2]) {
    const float* k_scales = tile_scales(tile);
    const float* v_scales = k_scales + kBlockN;
    const int first_key = tile * kBlockN;
    const bool partial = first_key + kBlockN > r.context_len;
    const auto v_scale_pair = [&](int nb) {
      const int key = nb * 8 + (lane % 4) * 2;
      float2 v = *reinterpret_cast<const float2*>(v_scales + key);
      if (partial) {
        v.x = first_key + key < r.context_len ? v.x : 0.0f;
        v.y = first_key + key + 1 < r.context_len ? v.y : 0.0f;
      }
      return v;
    };
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb) {
      const float2 k = *reinterpret_cast<const float2*>(k_scales + nb * 8 + (lane % 4) * 2);
      s[nb][0] *= k.x, s[nb][1] *= k.y, s[nb][2] *= k.x, s[nb][3] *= k.y;
    }
    // Each row's largest V scale among the tile's keys it sees (on unmasked tiles all of them, the same for both
    // rows), over the 4 lanes of the row: a row's unit depends on its own keys only, so its result does not depend on
    // the rows it shares a block with (chunking, batching).
    const bool masked = (tile + 1) * kBlockN - 1 > first_position;
    float tile_v_max[2] = {0, 0};
    if (masked) {
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) {
        const int key = first_key + nb * 8 + (lane % 4) * 2;
        const float2 v = v_scale_pair(nb);
#pragma unroll
        for (int i = 0; i < 2; ++i)
          tile_v_max[i] =
              fmaxf(tile_v_max[i], fmaxf(key <= position[i] ? v.x : 0.0f, key + 1 <= position[i] ? v.y : 0.0f));
      }
    } else {
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) {
        const float2 v = v_scale_pair(nb);
        tile_v_max[0] = fmaxf(tile_v_max[0], fmaxf(v.x, v.y));
      }
      tile_v_max[1] = tile_v_max[0];
    }
    float unit_ratio[2], per_unit[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tile_v_max[i] = fmaxf(tile_v_max[i], __shfl_xor_sync(0xffffffffu, tile_v_max[i], 1));
      tile_v_max[i] = fmaxf(tile_v_max[i], __shfl_xor_sync(0xffffffffu, tile_v_max[i], 2));
      const float new_reference = fmaxf(v_reference[i], tile_v_max[i]);
      unit_ratio[i] = v_reference[i] / new_reference;
      per_unit[i] = kFp8Max / new_reference;
      v_reference[i] = new_reference;
    }
    float correction[2];
    if (masked)
      softmax_tile<true>(s, first_key, position, row_scale, row_max, row_sum, correction);
    else
      softmax_tile<false>(s, first_key, position, row_scale, row_max, row_sum, correction);
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb) {
      const float2 v = v_scale_pair(nb);
      s[nb][0] *= v.x * per_unit[0], s[nb][1] *= v.y * per_unit[0];
      s[nb][2] *= v.x * per_unit[1], s[nb][3] *= v.y * per_unit[1];
    }
    o_factor[0] = correction[0] * unit_ratio[0];
    o_factor[1] = correction[1] * unit_ratio[1];
  };
  // A register's bytes are A's k positions 4 (lane % 4) + 0..3, here the keys 2 (lane % 4) + {0, 1, 8, 9} of the
  // 16-key half: the order in which transpose_v_tiles lays out Vᵀ.
  const auto pack_probabilities = [&] {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 32; ++kk)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int nb = 4 * kk + 2 * half;
        p_frag[kk][2 * half] = pack_e4m3x4(s[nb][0], s[nb][1], s[nb + 1][0], s[nb + 1][1]);
        p_frag[kk][2 * half + 1] = pack_e4m3x4(s[nb][2], s[nb][3], s[nb + 1][2], s[nb + 1][3]);
      }
  };

  float o_factor[2];
  wait_for(b.full_k, 0);
  issue_scores(0);
  sm90::wgmma_wait<0>();
  sm90::wgmma_fence_operands(s);
  probabilities(0, o_factor);
  release(b.empty_k, 0);
  pack_probabilities();
  for (int tile = 1; tile < r.num_tiles; ++tile) {
    wait_for(b.full_k, tile);
    wait_for(b.full_vt, tile - 1);
    issue_scores(tile);
    issue_values(tile - 1);
    sm90::wgmma_wait<1>();
    sm90::wgmma_fence_operands(s);
    probabilities(tile, o_factor);
    release(b.empty_k, tile);
    sm90::wgmma_wait<0>();
    sm90::wgmma_fence_operands(o);
    sm90::wgmma_fence_operands(p_frag);
    release(b.empty_vt, tile - 1);
    if (__any_sync(0xffffffffu, o_factor[0] != 1.0f || o_factor[1] != 1.0f)) {
#pragma unroll
      for (int nb = 0; nb < kDimBlocks; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nb][e] *= o_factor[e / 2];
    }
    pack_probabilities();
  }
  wait_for(b.full_vt, r.num_tiles - 1);
  issue_values(r.num_tiles - 1);
  sm90::wgmma_wait<0>();
  sm90::wgmma_fence_operands(o);
  release(b.empty_vt, r.num_tiles - 1);

  // out = O v_unit / sum: the sums taken into O's unit.
  row_sum[0] *= kFp8Max / v_reference[0];
  row_sum[1] *= kFp8Max / v_reference[1];
  store_attention_rows<kHeadDim>(o, row_sum, p.out, p.num_heads, r.head, r.q_start, r.q_len, first_q + row_base);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// grid (num_heads, num_prefill, ceil(max_q_len / kBlockM)), as the bf16 kernel.
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention_fp8_kernel(const PrefillAttentionParams p, const __grid_constant__ CUtensorMap k_map,
                                 const __grid_constant__ CUtensorMap v_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Layout = SharedLayout;
  TileRange r;
  if (!block_tile_range(p, r)) return;

  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (sm90::shared_address(shared_raw) & 1023)) & 1023);
  uint64_t* barriers = reinterpret_cast<uint64_t*>(shared + Layout::kBarrierOffset);
  const Fp8Barriers b{barriers,
                      barriers + kStages,
                      barriers + 2 * kStages,
                      barriers + 3 * kStages,
                      barriers + 4 * kStages,
                      barriers + 5 * kStages};
  constexpr int kConsumerWarps = kConsumers * kWarpgroupThreads / 32;
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&b.full_k[stage], 1);
      sm90::mbarrier_init(&b.empty_k[stage], kConsumerWarps);
      sm90::mbarrier_init(&b.full_v_copy[stage], 1);
      sm90::mbarrier_init(&b.empty_v_copy[stage], kTransposeWarps);
      sm90::mbarrier_init(&b.full_vt[stage], kTransposeWarps);
      sm90::mbarrier_init(&b.empty_vt[stage], kConsumerWarps);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / kWarpgroupThreads, warp = threadIdx.x / 32;
  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<kProducerRegisters>();
    if (warp < 2)
      copy_tiles(p, warp == 0 ? &k_map : &v_map, r, shared, b, warp == 0);
    else if (warp < 2 + kTransposeWarps)
      transpose_v_tiles(r, shared, b, warp - 2);
  } else {
    sm90::setmaxnreg_inc<kConsumerRegisters>();
    consume_kv_tiles(p, r, warpgroup - 1, shared, b);
  }
#else
  (void)p, (void)k_map, (void)v_map;
#endif
}

}  // namespace

bool prefill_attention_fp8_available(const DeviceCapabilities& device, int head_dim, int block_size) {
  return device.hopper_kernels && head_dim == kHeadDim && block_size > 0 && block_size % 16 == 0;
}

void launch_prefill_attention_fp8(const PrefillAttentionParams& params, const KernelStream& stream) {
  QINFER_CHECK(prefill_attention_fp8_available(stream.device, params.head_dim, params.block_size),
               "the fp8 prefill attention needs the sm_90a kernels on a compute 9.0 device, head_dim 128 and a block "
               "size that is a multiple of 16");
  if (params.num_prefill == 0 || params.max_q_len == 0) return;
  QINFER_CHECK(params.num_kv_heads > 0 && params.num_heads % params.num_kv_heads == 0);
  QINFER_CHECK(
      params.k_fp8 != nullptr && params.v_fp8 != nullptr && params.k_scales != nullptr && params.v_scales != nullptr,
      "the fp8 prefill attention reads the fp8 cache and its scales");
  QINFER_CHECK(params.pool_blocks > 0, "the fp8 kernel needs the cache's block count (its tensor maps)");
  constexpr int kSharedBytes = SharedLayout::kBytes;
  CUDA_CHECK(
      cudaFuncSetAttribute(prefill_attention_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  const dim3 grid(params.num_heads, params.num_prefill, (params.max_q_len + kBlockM - 1) / kBlockM);
  // The caches as [blocks * kv_heads * block_size, 128] byte matrices, copied in boxes of 16 rows.
  const int64_t cache_rows = params.pool_blocks * params.num_kv_heads * params.block_size;
  const CUtensorMap k_map = make_u8_tensor_map_swizzle128(params.k_fp8, cache_rows, 16);
  const CUtensorMap v_map = make_u8_tensor_map_swizzle128(params.v_fp8, cache_rows, 16);
  prefill_attention_fp8_kernel<<<grid, kThreads, kSharedBytes, stream.stream>>>(params, k_map, v_map);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda
