// The decode attention kernels' fused QK-norm / RoPE / cache write (DecodeAttentionParams::fuse_rope): the work the
// QK-norm/RoPE kernel would do for the block's decode token, with that kernel's per-head math (qk_norm_rope.cuh).
#pragma once

#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/qk_norm_rope.cuh"

namespace qinfer::cuda::decode_block {

// Shared memory a launch adds for fused_rope's query stage ([kGroupRows][kHeadDim] bf16): none when not fused.
template <int kHeadDim>
int fused_query_stage_bytes(const DecodeAttentionArgs& p) {
  return p.fuse_rope ? kGroupRows * kHeadDim * static_cast<int>(sizeof(__nv_bfloat16)) : 0;
}

// What a lane of the fused QK-norm/RoPE reads that no kernel of the step writes: the RoPE angles of the token's
// position (uploaded with the batch) and its elements of the q/k norm weights. Kernels compute it before waiting for
// the previous kernel, so these loads and the sincos leave the chain that starts at the wait. Zeros when not fused.
template <int kHeadDim>
struct RopeLane {
  float cos_v[kHeadDim / 32], sin_v[kHeadDim / 32], q_norm[kHeadDim / 32], k_norm[kHeadDim / 32];
};

template <int kHeadDim>
__device__ __forceinline__ RopeLane<kHeadDim> rope_lane(const DecodeAttentionArgs& p, const BlockWork& w, int lane) {
  RopeLane<kHeadDim> c{};
  const QkNormRopeCacheWriteParams& r = p.rope;
  if (!p.fuse_rope) return c;
  qk_rope::rope_angles<kHeadDim>(r.positions[w.q_row], r.inv_freq, lane, c.cos_v, c.sin_v);
  qk_rope::norm_weights<kHeadDim>(r.q_norm, lane, c.q_norm);
  qk_rope::norm_weights<kHeadDim>(r.k_norm, lane, c.k_norm);
  return c;
}

// The GQA group's query heads of the block's decode token, normalised and rotated, into `q_stage` ([group][kHeadDim]
// bf16, shared memory); and where the block's split holds the sequence's current token, that token's K (normalised,
// rotated) and V of the block's KV head into the cache, bf16 or fp8 (kFp8), and with a bf16 cache also into
// `current_stage` ([K|V][kHeadDim] bf16, shared memory) when it is not null. `c` is the lane's rope_lane(). Ends with a
// block barrier, after which the block's threads see the cache writes, and with kBulkCopyReads the copy engine too
// (the writers' proxy fence orders their generic stores before bulk copies issued after the barrier). Every thread of
// the block calls it.
template <int kHeadDim, bool kFp8, bool kBulkCopyReads = false>
__device__ __forceinline__ void fused_rope(const DecodeAttentionArgs& p, const BlockWork& w,
                                           const RopeLane<kHeadDim>& c, __nv_bfloat16* q_stage, int warp, int lane,
                                           __nv_bfloat16* current_stage = nullptr) {
  using namespace qk_rope;
  constexpr int kPerLane = kHeadDim / 32;
  const QkNormRopeCacheWriteParams& r = p.rope;
  const int token = w.q_row;
  const __nv_bfloat16* source =
      r.qkv + static_cast<int64_t>(token) * (r.num_heads + 2 * r.num_kv_heads) * kHeadDim + lane * kPerLane;
  const auto head = [&](int index, float(&x)[kPerLane]) {
    head_values<kHeadDim>(*reinterpret_cast<const LaneVector<kHeadDim>*>(source + index * kHeadDim), x);
  };
  for (int h = warp; h < w.group; h += kWarps) {
    float x[kPerLane];
    head(w.kv_head * w.group + h, x);
    norm_rope<kHeadDim>(x, c.q_norm, r.eps, c.cos_v, c.sin_v, lane);
    store_head_bf16<kHeadDim>(x, q_stage + h * kHeadDim, lane);
  }
  const int current = p.context_lens[w.seq] - 1;
  if (current >= w.begin && current < w.end && warp < 2) {  // warp 0: K, warp 1: V
    const bool is_k = warp == 0;
    float x[kPerLane];
    head(r.num_heads + (is_k ? 0 : r.num_kv_heads) + w.kv_head, x);
    if (is_k) norm_rope<kHeadDim>(x, c.k_norm, r.eps, c.cos_v, c.sin_v, lane);
    const int64_t slot = r.slots[token];
    const int64_t kv_vector =
        slot_vector(slot / r.block_size, slot % r.block_size, w.kv_head, r.num_kv_heads, r.block_size);
    if constexpr (kFp8) {
      store_fp8_vector<kHeadDim>(x, (is_k ? r.k_fp8 : r.v_fp8) + kv_vector * kHeadDim,
                                 (is_k ? r.k_scales : r.v_scales) + kv_vector, lane);
    } else {
      store_head_bf16<kHeadDim>(x, (is_k ? r.k_cache : r.v_cache) + kv_vector * kHeadDim, lane);
      if (current_stage != nullptr) store_head_bf16<kHeadDim>(x, current_stage + (is_k ? 0 : kHeadDim), lane);
    }
    if constexpr (kBulkCopyReads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
    }
  }
  __syncthreads();
}

// The cp.async kernels' start: `prologue()` (the copies of their first `prologue_tiles` tiles) before waiting for the
// previous kernel unless one of those tiles holds the current token (current_token_tile), then, with p.fuse_rope, the
// fused QK-norm/RoPE into `q_stage`, then the prologue if it had to wait. Every thread of the block calls it.
template <int kHeadDim, bool kFp8, typename Prologue>
__device__ __forceinline__ void copy_first_tiles_around_wait(const DecodeAttentionArgs& p, const BlockWork& w,
                                                             int prologue_tiles, __nv_bfloat16* q_stage, int warp,
                                                             int lane, Prologue prologue) {
  const int current_tile = current_token_tile(p, w);
  const bool before_wait = current_tile < 0 || current_tile >= prologue_tiles;
  if (before_wait) prologue();
  const RopeLane<kHeadDim> rope = rope_lane<kHeadDim>(p, w, lane);
  wait_for_producer();
  if (p.fuse_rope) fused_rope<kHeadDim, kFp8>(p, w, rope, q_stage, warp, lane);
  if (!before_wait) prologue();
}

}  // namespace qinfer::cuda::decode_block
