// Decode attention over an fp8 cache for small batches with K/V in registers: the fp8 kernels' warp step
// (attend_fp8_keys: fragments built straight from the E4M3 bytes, scales folded into scores and probabilities) fed
// from the paged cache by each thread's own 16-byte loads instead of a shared-memory ring, for the reasons of
// registers.cu: no max-shared carveout to switch the SMs to, and the first tile loaded before waiting
// for the QK-norm/RoPE/cache-write kernel (which writes only the current token's K/V and scales).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_fragments.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_tile.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// This thread's bytes of its warp's 16 keys, in the order attend_fp8_keys asks for them.
template <int kHeadDim>
struct Fp8KeyRegisters {
  uint32_t k[2][kHeadDim / 16];  // keys lane / 4 (+ 8): bytes [(lane % 4) * kHeadDim / 4, + kHeadDim / 4)
  uint32_t v[4][kHeadDim / 32];  // keys 2 (lane % 4) + k % 2 + 8 (k / 2): bytes [(lane / 4) * kHeadDim / 8, + / 8)
};

// `words` 4-byte words from byte `offset` of `row` (16-byte aligned when kWords >= 4, else 8-byte), through L2 only;
// zeros where `row` is null (a key past the limit).
template <int kWords>
__device__ __forceinline__ void load_words(const uint8_t* row, int offset, uint32_t (&words)[kWords]) {
  if (row == nullptr) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) words[i] = 0;
  } else if constexpr (kWords == 2) {
    const uint2 v = __ldcg(reinterpret_cast<const uint2*>(row + offset));
    words[0] = v.x;
    words[1] = v.y;
  } else {
#pragma unroll
    for (int c = 0; c < kWords / 4; ++c) {
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(row + offset) + c);
      words[4 * c] = v.x;
      words[4 * c + 1] = v.y;
      words[4 * c + 2] = v.z;
      words[4 * c + 3] = v.w;
    }
  }
}

// Loads this thread's bytes of keys first + [0, 16) that are below `limit` (others zero: V codes past the context
// must not be NaN, since probability 0 times NaN is NaN), or with `only` >= 0 only those of key `only`.
template <int kHeadDim>
__device__ __forceinline__ void load_fp8_keys(Fp8KeyRegisters<kHeadDim>& regs, const DecodeAttentionArgs& p,
                                              const BlockWork& w, int first, int limit, int only, int lane) {
  const int row = lane / 4, quad = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = first + row + 8 * half;
    if (only >= 0 && key != only) continue;
    load_words(key < limit ? p.k_fp8 + cache_vector(p, w, key) * kHeadDim : nullptr, quad * (kHeadDim / 4),
               regs.k[half]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int key = first + 2 * quad + k % 2 + 8 * (k / 2);
    if (only >= 0 && key != only) continue;
    load_words(key < limit ? p.v_fp8 + cache_vector(p, w, key) * kHeadDim : nullptr, row * (kHeadDim / 8), regs.v[k]);
  }
}

// grid (num_splits, num_kv_heads, num_decode), as cp_async.cu's decode_attention_kernel. Dynamic shared memory: the
// warps' hand-over and merge scratch (fp8_registers_shared_bytes).
template <int kHeadDim, int kHeadBlocks>
__global__ void __launch_bounds__(kThreads) decode_attention_fp8_registers_kernel(DecodeAttentionArgs p) {
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  extern __shared__ __align__(16) float scratch[];
  // The fused RoPE stages the group's query heads in the scratch, which is free until the hand-over.
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(scratch);
  const bool fused = p.fuse_rope;
  Fp8KeyRegisters<kHeadDim> regs;
  RopeLane<kHeadDim> rope{};
  const int first = load_first_keys_then_wait(
      p, w, warp, [&](int from, int limit) { load_fp8_keys<kHeadDim>(regs, p, w, from, limit, -1, lane); },
      [&] { rope = rope_lane<kHeadDim>(p, w, lane); },
      [&] {
        if (fused) fused_rope<kHeadDim, true>(p, w, rope, q_stage, warp, lane);
      },
      [&](int from, int current) { load_fp8_keys<kHeadDim>(regs, p, w, from, w.end, current, lane); });

  // Only now may o_proj launch (as in registers.cu; graph_cache.h,
  // GraphNodeRole::kRegisterDecodeAttention).
  allow_dependents();
  Fp8WarpState<kHeadDim, kHeadBlocks> st;
  if (fused) {
    load_query_fragments_t<kHeadDim, kHeadBlocks, true>(st.q, q_stage, w.group, lane);
    __syncthreads();  // every warp has its query before any warp hands over through the scratch
  } else {
    load_query_fragments_t<kHeadDim, kHeadBlocks>(st.q, group_query<kHeadDim>(p, w), w.group, lane);
  }
  const float scale_log2 = p.scale * kLog2e * fp8_code_unit();
  const int row = lane / 4;
  over_warp_keys(
      w, warp, first, [&](int from) { load_fp8_keys<kHeadDim>(regs, p, w, from, w.end, -1, lane); },
      [&](int from) {
        // The warp's 16 keys lie in one page (block sizes are multiples of 16): their scales are contiguous.
        const int64_t scales = cache_vector(p, w, from) + row;
        attend_fp8_keys(
            st,
            [&](int half, int first_step, uint32_t(&words)[4]) {
#pragma unroll
              for (int i = 0; i < 4; ++i) words[i] = regs.k[half][first_step + i];
            },
            [&](int k, uint32_t(&words)[kHeadDim / 32]) {
#pragma unroll
              for (int i = 0; i < kHeadDim / 32; ++i) words[i] = regs.v[k][i];
            },
            [&](int half) { return __ldcg(p.k_scales + scales + 8 * half); },
            [&](int half) { return __ldcg(p.v_scales + scales + 8 * half); }, from + row, w.end, scale_log2);
      });

  __shared__ float head_stats[kWarps][2][kGroupRows];
  WarpState<kHeadDim> heads = fp8_states_to_head_rows(st, scratch, head_stats, warp, lane);
  finish_block<kHeadDim>(p, w, heads, scratch, w.group, warp, lane, fragment_row_store<kHeadDim>(heads, lane));
}

// The larger of the warps' hand-over (fp8_states_to_head_rows) and finish_block's merge scratch.
template <int kHeadDim, int kHeadBlocks>
int fp8_registers_shared_bytes(int group) {
  const int hand_over = kWarps * TransposedScratch<kHeadDim, kHeadBlocks>::kWarpFloats;
  return std::max(hand_over, kWarps * group * kHeadDim) * static_cast<int>(sizeof(float));
}

}  // namespace

void launch_decode_attention_fp8_registers(const DecodeAttentionArgs& p, const KernelStream& stream) {
  QINFER_CHECK(p.kv_dtype == KvCacheDtype::kFp8E4m3, "the fp8 register decode attention kernel reads an fp8 cache");
  if (p.num_decode == 0) return;
  const int group = p.num_heads / p.num_kv_heads;
  with_head_dim(p.head_dim, [&](auto dim) {
    constexpr int kHeadDim = decltype(dim)::value;
    const auto launch = [&](auto kernel, int shared_bytes) {
      if (shared_bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
      launch_dependent(kernel, dim3(p.num_splits, p.num_kv_heads, p.num_decode), kThreads, shared_bytes, stream, p);
    };
    if (fp8_head_blocks(group) == 1)
      launch(decode_attention_fp8_registers_kernel<kHeadDim, 1>, fp8_registers_shared_bytes<kHeadDim, 1>(group));
    else
      launch(decode_attention_fp8_registers_kernel<kHeadDim, 2>, fp8_registers_shared_bytes<kHeadDim, 2>(group));
  });
}

}  // namespace qinfer::cuda
