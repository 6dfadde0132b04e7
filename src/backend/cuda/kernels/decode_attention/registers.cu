// Decode attention for small batches with K/V in registers: the blocks of cp_async.cu (split-KV, GQA group as
// the rows of an m16 tensor-core tile, 64-key tiles of which each warp owns 16 keys, in-kernel split merge), but each
// thread loads its share of K and V from the paged cache straight into the registers its mma fragments need, without
// a shared-memory tile ring. Two reasons, both about the batch-1 decode chain (docs/CUDA_DESIGN.md, "Decode
// attention: the family"):
// - the cp.async and bulk-copy kernels need ~100 KB of shared memory per block and ask for the max-shared carveout, so
//   the SMs are reconfigured around every attention launch (about 8 µs per layer at batch 1); this kernel needs only
//   the few KB of the warps' merge and leaves the carveout to the driver;
// - K/V of keys before the current token do not depend on the previous kernel (the QK-norm/RoPE/cache-write kernel
//   writes only the current token's slot), so the first tile is loaded before waiting for it.
//
// Fragment layouts (m16n8k16, lane = 4 * g + c): a thread's B operand of S = Q·Kᵀ is 2 dims of key g per register,
// and of O += P·V 2 keys of one dim. The head dims are permuted (consistently for Q and K, and undone when O is
// stored) so that every thread loads whole 16-byte vectors:
// - S: k-step 2i + h covers dims 32i + 8c + 4h + {0, 1} (its k columns 2c, 2c + 1) and + {2, 3} (columns 2c + 8,
//   2c + 9), so thread (g, c) loads dims [32i + 8c, 32i + 8c + 8) of its keys g and 8 + g;
// - P·V: n8 block 8i + j, column n is dim 64i + 8n + j, so thread (g, c) loads dims [64i + 8g, 64i + 8g + 8) of its
//   keys 2c, 2c + 1, 2c + 8, 2c + 9 and pairs the keys' halves with byte permutes; its accumulator columns 2c, 2c + 1
//   are then dims 64i + 16c + j and 64i + 16c + 8 + j.
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/kernels/tensor_core_tiles.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

static_assert(kWarpKeys == 16, "a warp's keys are one m16n8k16 k-step");

// This thread's share of its warp's 16 keys.
template <int kHeadDim>
struct KeyRegisters {
  uint4 k[2][kHeadDim / 32];  // keys g and 8 + g: dims [32i + 8c, +8)
  uint4 v[4][kHeadDim / 64];  // keys 2c, 2c + 1, 2c + 8, 2c + 9: dims [64i + 8g, +8)
};

// Row `key` of one KV head in a paged pool [num_blocks, num_kv_heads, block_size, kHeadDim], as 16-byte vectors.
template <int kHeadDim>
__device__ __forceinline__ const uint4* cache_row(const __nv_bfloat16* pool, const DecodeAttentionArgs& p,
                                                  const BlockWork& w, int key) {
  return reinterpret_cast<const uint4*>(pool + cache_vector(p, w, key) * kHeadDim);
}

__device__ __forceinline__ int v_key(int slot, int c) { return 2 * c + (slot & 1) + (slot >> 1) * 8; }

// Loads the rows of keys first + [0, 16) that this thread owns and that are below `limit` (others become zero: V rows
// must be finite, since probability 0 times NaN is NaN), or with `only` >= 0 only those of key `only`. Loads go
// through L2 only (no L1 line can be stale, and every load instruction of a warp reads whole 32-byte sectors).
template <int kHeadDim>
__device__ __forceinline__ void load_keys(KeyRegisters<kHeadDim>& regs, const DecodeAttentionArgs& p,
                                          const BlockWork& w, int first, int limit, int only, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int key = first + 8 * n + g;
    if (only >= 0 && key != only) continue;
    const uint4* row = key < limit ? cache_row<kHeadDim>(p.k_cache, p, w, key) : nullptr;
#pragma unroll
    for (int i = 0; i < kHeadDim / 32; ++i) regs.k[n][i] = row ? __ldcg(row + 4 * i + c) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int slot = 0; slot < 4; ++slot) {
    const int key = first + v_key(slot, c);
    if (only >= 0 && key != only) continue;
    const uint4* row = key < limit ? cache_row<kHeadDim>(p.v_cache, p, w, key) : nullptr;
#pragma unroll
    for (int i = 0; i < kHeadDim / 64; ++i) regs.v[slot][i] = row ? __ldcg(row + 8 * i + g) : make_uint4(0, 0, 0, 0);
  }
}

// Where this thread owns rows of key `current` among first + [0, 16): those rows from `stage` ([K|V][kHeadDim] bf16 in
// shared memory, where the fused QK-norm/RoPE left the current token) instead of the cache, one L2 round trip less
// on the path of the block that holds the current token.
template <int kHeadDim>
__device__ __forceinline__ void load_current_key(KeyRegisters<kHeadDim>& regs, const __nv_bfloat16* stage, int first,
                                                 int current, int lane) {
  const int g = lane / 4, c = lane % 4;
  const uint4* k_row = reinterpret_cast<const uint4*>(stage);
  const uint4* v_row = reinterpret_cast<const uint4*>(stage + kHeadDim);
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    if (first + 8 * n + g != current) continue;
#pragma unroll
    for (int i = 0; i < kHeadDim / 32; ++i) regs.k[n][i] = k_row[4 * i + c];
  }
#pragma unroll
  for (int slot = 0; slot < 4; ++slot) {
    if (first + v_key(slot, c) != current) continue;
#pragma unroll
    for (int i = 0; i < kHeadDim / 64; ++i) regs.v[slot][i] = v_row[8 * i + g];
  }
}

// The GQA group's query tile as A fragments in the permuted dim order of S (file comment); padding rows are zero.
// kShared: group_q is in shared memory (the fused RoPE's stage), else read-only global memory.
template <int kHeadDim, bool kShared>
__device__ __forceinline__ void load_permuted_query(uint32_t (&q_frag)[kHeadDim / 16][4], const __nv_bfloat16* group_q,
                                                    int group, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
#pragma unroll
    for (int i = 0; i < kHeadDim / 32; ++i) {
      const uint4* at = reinterpret_cast<const uint4*>(group_q + row * kHeadDim + 32 * i + 8 * c);
      const uint4 u = row >= group ? make_uint4(0, 0, 0, 0) : kShared ? *at : __ldg(at);
      q_frag[2 * i][r] = u.x;
      q_frag[2 * i][2 + r] = u.y;
      q_frag[2 * i + 1][r] = u.z;
      q_frag[2 * i + 1][2 + r] = u.w;
    }
  }
}

__device__ __forceinline__ uint32_t word(const uint4& u, int index) {
  return index == 0 ? u.x : index == 1 ? u.y : index == 2 ? u.z : u.w;
}

// This warp's 16 keys first + [0, 16): scores on tensor cores, masked at `end`, one online-softmax step, O += P·V.
template <int kHeadDim>
__device__ __forceinline__ void attend_keys(WarpState<kHeadDim>& st, const KeyRegisters<kHeadDim>& regs, int first,
                                            int end, float scale_log2, int lane) {
  float s[2][4] = {};
#pragma unroll
  for (int i = 0; i < kHeadDim / 32; ++i)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      mma_bf16(s[n], st.q_frag[2 * i], regs.k[n][i].x, regs.k[n][i].y);
      mma_bf16(s[n], st.q_frag[2 * i + 1], regs.k[n][i].z, regs.k[n][i].w);
    }
  uint32_t a[4];
  scores_to_probabilities(st, s, first, end, scale_log2, lane, a);
#pragma unroll
  for (int i = 0; i < kHeadDim / 64; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // Dim 8g + j of the thread's four keys: bf16 half j % 2 of 32-bit word j / 2; keys 2c, 2c + 1 make b0.
      const uint32_t selector = j % 2 == 0 ? 0x5410u : 0x7632u;
      const uint32_t b0 = __byte_perm(word(regs.v[0][i], j / 2), word(regs.v[1][i], j / 2), selector);
      const uint32_t b1 = __byte_perm(word(regs.v[2][i], j / 2), word(regs.v[3][i], j / 2), selector);
      mma_bf16(st.o[8 * i + j], a, b0, b1);
    }
}

// grid (num_splits, num_kv_heads, num_decode), as cp_async.cu's decode_attention_kernel. Dynamic shared memory: the
// warps' merge scratch, [kWarps][group][kHeadDim] fp32.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) decode_attention_registers_kernel(DecodeAttentionArgs p) {
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  extern __shared__ __align__(16) float scratch[];
  // The fused RoPE stages the group's query heads and the current token's K/V in the merge scratch, which is free
  // until the merge.
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(scratch);
  __nv_bfloat16* current_stage = q_stage + w.group * kHeadDim;
  const bool fused = p.fuse_rope;
  KeyRegisters<kHeadDim> regs;
  RopeLane<kHeadDim> rope{};
  const int first = load_first_keys_then_wait(
      p, w, warp, [&](int from, int limit) { load_keys<kHeadDim>(regs, p, w, from, limit, -1, lane); },
      [&] { rope = rope_lane<kHeadDim>(p, w, lane); },
      [&] {
        if (fused) fused_rope<kHeadDim, false>(p, w, rope, q_stage, warp, lane, current_stage);
      },
      [&](int from, int current) {
        if (fused)
          load_current_key<kHeadDim>(regs, current_stage, from, current, lane);
        else
          load_keys<kHeadDim>(regs, p, w, from, w.end, current, lane);
      });

  // Only now may o_proj launch: its blocks request all their weights at once, and before this point those requests
  // would queue ahead of this kernel's dependent loads (graph_cache.h, GraphNodeRole::kRegisterDecodeAttention).
  allow_dependents();
  WarpState<kHeadDim> st;
  if (fused) {
    load_permuted_query<kHeadDim, true>(st.q_frag, q_stage, w.group, lane);
    __syncthreads();  // every warp has its query before any warp merges into the scratch
  } else {
    load_permuted_query<kHeadDim, false>(st.q_frag, group_query<kHeadDim>(p, w), w.group, lane);
  }
  const float scale_log2 = p.scale * kLog2e;
  over_warp_keys(
      w, warp, first, [&](int from) { load_keys<kHeadDim>(regs, p, w, from, w.end, -1, lane); },
      [&](int from) { attend_keys<kHeadDim>(st, regs, from, w.end, scale_log2, lane); });

  const int c = lane % 4;
  finish_block<kHeadDim>(p, w, st, scratch, w.group, warp, lane, [&st, c](float* row, int r) {
#pragma unroll
    for (int i = 0; i < kHeadDim / 64; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        row[64 * i + 16 * c + j] = st.o[8 * i + j][2 * r];
        row[64 * i + 16 * c + 8 + j] = st.o[8 * i + j][2 * r + 1];
      }
  });
}

}  // namespace

void launch_decode_attention_registers(const DecodeAttentionArgs& p, const KernelStream& stream) {
  QINFER_CHECK(p.kv_dtype == KvCacheDtype::kBf16, "the register decode attention kernel reads a bf16 cache");
  if (p.num_decode == 0) return;
  const int shared_bytes = kWarps * (p.num_heads / p.num_kv_heads) * p.head_dim * 4;  // 32 KB at most (group 16)
  with_head_dim(p.head_dim, [&](auto dim) {
    constexpr int kHeadDim = decltype(dim)::value;
    launch_dependent(decode_attention_registers_kernel<kHeadDim>, dim3(p.num_splits, p.num_kv_heads, p.num_decode),
                     kThreads, shared_bytes, stream, p);
  });
}

}  // namespace qinfer::cuda
