#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/fp8_fragments.cuh"
#include "backend/cuda/kernels/decode_attention/fused_rope.cuh"
#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// Blocks of the attention kernels resident on one SM, from shared memory alone (228 KB per SM on Hopper, 1 KB of it
// reserved per block, up to 1 KB of alignment slack in the bulk-copy kernel; registers and threads allow more): the
// bf16 kernels' tile ring (2 tiles for the 2-stage bulk-copy kernel, else 3), or the cp.async fp8 kernel's ring (its
// registers allow the kBlocksPerSm its launch bounds ask for); the Hopper fp8 kernel asserts its own figure fits. Only
// steers the split plan, so an estimate suffices.
template <int kHeadDim>
constexpr int resident_blocks_per_sm(bool fp8, bool fp8_bulk_copy, bool two_stage) {
  if (fp8 && fp8_bulk_copy) return kFp8BulkCopyBlocksPerSm;
  constexpr int kStaticShared = 2 * kWarps * kGroupRows * 4 + 16 + kStages * 8;
  const int dynamic_shared = fp8         ? Fp8Layout<kHeadDim>::kSharedBytes
                             : two_stage ? ring_bytes<kHeadDim, 2>()
                                         : ring_bytes<kHeadDim>();
  const int by_shared = (228 * 1024) / (dynamic_shared + 1024 + kStaticShared + 1024);
  return std::min(fp8 ? Fp8Layout<kHeadDim>::kBlocksPerSm : 16, by_shared);
}

// The kernel a launch asked for `kernel` runs: kAuto's choice, and over an fp8 cache kBulkCopyTwoStage as kBulkCopy.
DecodeAttentionKernel resolve_auto(const DecodeAttentionParams& p, DecodeAttentionKernel kernel,
                                   const DeviceCapabilities& device) {
  if (kernel == DecodeAttentionKernel::kAuto) return decode_attention_auto_kernel(p, device);
  if (kernel == DecodeAttentionKernel::kBulkCopyTwoStage && p.k_fp8 != nullptr) return DecodeAttentionKernel::kBulkCopy;
  return kernel;
}

// Whether an fp8 launch asked for `kernel` runs the Hopper fp8 kernel: it serves head_dim 128 and groups of at most 8.
bool runs_fp8_bulk_copy(const DecodeAttentionParams& p, DecodeAttentionKernel kernel,
                        const DeviceCapabilities& device) {
  return p.k_fp8 != nullptr && resolve_auto(p, kernel, device) == DecodeAttentionKernel::kBulkCopy &&
         p.head_dim == 128 && fp8_head_blocks(p.num_heads / p.num_kv_heads) == 1;
}

// grid (num_splits, num_kv_heads, num_decode). The query heads of one GQA group are the rows of an m16 tile, so K and
// V of the group's KV head are read once and multiplied on tensor cores. 64-token K/V tiles stream through a
// kStages-deep cp.async ring (two tiles in flight while one is computed, one barrier per tile); each warp owns 16 keys
// of every tile and keeps its own online-softmax state, merged through shared memory at the end. The first tiles are
// copied before waiting for the previous kernel unless one of them holds the current token (current_token_tile); with
// p.rope set the block's fused QK-norm/RoPE writes that token's K/V after the wait.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 2) decode_attention_kernel(DecodeAttentionParams p) {
  constexpr int kTileElements = kTileTokens * kHeadDim;
  allow_dependents();
  const BlockWork w = block_work(p);
  if (w.idle()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool fused = p.rope.qkv != nullptr;

  extern __shared__ __align__(16) unsigned char shared_raw[];
  __nv_bfloat16* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [kStages][K|V][kTileTokens][kHeadDim]
  // With the fused RoPE: the group's query heads [group][kHeadDim] after the ring.
  __nv_bfloat16* q_stage = reinterpret_cast<__nv_bfloat16*>(shared_raw + ring_bytes<kHeadDim>());
  const auto k_stage = [&](int tile) { return tiles + (tile % kStages) * 2 * kTileElements; };
  const auto load = [&](int tile) {
    load_kv_tiles<kHeadDim, kThreads, kTileTokens>(k_stage(tile), k_stage(tile) + kTileElements, p.k_cache, p.v_cache,
                                                   w.table, w.begin + tile * kTileTokens, w.end, w.kv_head,
                                                   p.num_kv_heads, p.block_size);
  };

  // Prologue: the first kStages - 1 tiles, one cp.async group each (empty groups keep the count uniform).
  const auto prologue = [&] {
#pragma unroll
    for (int tile = 0; tile < kStages - 1; ++tile) {
      if (tile < w.num_tiles) load(tile);
      cp_async_commit();
    }
  };
  copy_first_tiles_around_wait<kHeadDim, false>(p, w, kStages - 1, q_stage, warp, lane, prologue);
  WarpState<kHeadDim> st;
  if (fused)
    load_query_fragments<kHeadDim, true>(st.q_frag, q_stage, w.group, lane);
  else
    load_query_fragments<kHeadDim>(st.q_frag, group_query<kHeadDim>(p, w), w.group, lane);

  const float scale_log2 = p.scale * kLog2e;
  for (int tile = 0; tile < w.num_tiles; ++tile) {
    cp_async_wait_group<kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();                     // everyone's have; everyone is done with tile - 1, whose stage is refilled
    const int next = tile + kStages - 1;
    if (next < w.num_tiles) load(next);
    cp_async_commit();
    // Rows past `end` were zero-filled by the copy.
    attend_tile<kHeadDim>(
        st, k_stage(tile), k_stage(tile) + kTileElements,
        [](int row, int chunk) { return swizzle<kHeadDim>(row, chunk); }, w.begin + tile * kTileTokens, w.end,
        scale_log2, warp, lane);
  }
  cp_async_wait_all();
  finish_block<kHeadDim>(p, w, st, reinterpret_cast<float*>(tiles), kGroupRows, warp, lane,
                         fragment_row_store<kHeadDim>(st, lane));
}

// grid (num_kv_heads, num_decode): merges the splits of one GQA group when no arrival counters are given (a sequence
// with one active split got its output from the attention kernel).
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) merge_splits_kernel(DecodeAttentionParams p) {
  allow_dependents();
  wait_for_producer();
  const int group = p.num_heads / p.num_kv_heads, splits = active_splits(p, p.context_lens[blockIdx.y]);
  if (splits > 1) merge_group_splits<kHeadDim>(p, blockIdx.y, blockIdx.x * group, group, splits);
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionParams& p, const KernelStream& stream) {
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= ring_bytes<kHeadDim>(), "merge scratch must fit");
  const int shared = ring_bytes<kHeadDim>() + fused_query_stage_bytes<kHeadDim>(p);
  launch_decode_blocks(decode_attention_kernel<kHeadDim>, p, shared, stream, p);
}

// Estimated cost of a plan in 32nds of a tile per resident slot (docs/CUDA_DESIGN.md, "Decode attention: the split
// plan"): full or partial waves of blocks times (tiles per block plus about two tiles' worth of pipeline fill and merge
// per block), plus `merge_per_split` for each split of a sequence (the last block of each (sequence, KV head) merges
// the splits one after another).
int64_t plan_cost(int64_t blocks, int64_t capacity, int64_t tiles_per_block, int64_t splits, int64_t merge_per_split) {
  constexpr int64_t kBlockOverheadTiles = 2;
  return (blocks + capacity - 1) / capacity * (tiles_per_block + kBlockOverheadTiles) * 32 + splits * merge_per_split;
}

}  // namespace

int decode_attention_register_context(int num_decode, bool fp8) {
  // Measured on the H200 (docs/CUDA_DESIGN.md, "Decode attention: which kernel"; contexts are the graphs'
  // power-of-two buckets): 1-2 sequences keep the register kernel up to 8 K (bf16 2 x 8 K+: bulk copy 3.97 against 4.29
  // ms per step), 3-4 up to 2 K over bf16 and 8 K over fp8 (which reads half the bytes per key). fp8 with 1-2 sequences
  // was not measured past 8 K and keeps the register kernel.
  if (num_decode <= 2) return fp8 ? std::numeric_limits<int>::max() : 8192;
  return fp8 ? 8192 : 2048;
}

DecodeAttentionKernel decode_attention_auto_kernel(const DecodeAttentionParams& p, const DeviceCapabilities& device) {
  if (p.num_decode <= kDecodeAttentionRegisterBatch &&
      p.planned_context <= decode_attention_register_context(p.num_decode, p.k_fp8 != nullptr))
    return DecodeAttentionKernel::kRegisters;
  if (decode_attention_bulk_copy_available(p, device))
    return p.k_fp8 == nullptr && p.num_decode <= kDecodeAttentionTwoStageBatch
               ? DecodeAttentionKernel::kBulkCopyTwoStage
               : DecodeAttentionKernel::kBulkCopy;
  return DecodeAttentionKernel::kCpAsync;
}

void plan_decode_attention_splits(DecodeAttentionParams& p, int max_context_len, const DeviceCapabilities& device) {
  p.planned_context = max_context_len;
  const int num_sms = device.num_sms;
  const int64_t pairs = static_cast<int64_t>(p.num_decode) * p.num_kv_heads;
  const DecodeAttentionKernel kernel = decode_attention_auto_kernel(p, device);
  const bool fp8 = p.k_fp8 != nullptr, fp8_bulk = runs_fp8_bulk_copy(p, kernel, device);
  const bool two_stage = kernel == DecodeAttentionKernel::kBulkCopyTwoStage;
  const int64_t capacity =
      static_cast<int64_t>(num_sms) * (p.head_dim == 64 ? resident_blocks_per_sm<64>(fp8, fp8_bulk, two_stage)
                                                        : resident_blocks_per_sm<128>(fp8, fp8_bulk, two_stage));
  const int64_t tiles = std::max<int64_t>(1, (max_context_len + kTileTokens - 1) / kTileTokens);
  // num_decode * num_splits stays within decode_attention_max_split_rows.
  const int64_t max_splits =
      std::min<int64_t>(tiles, (static_cast<int64_t>(p.num_decode) + 4 * num_sms) / std::max(1, p.num_decode));
  // The fp8 kernel's tiles cost so little that the serial split merge shows: 5/32 of a tile per split puts the plans
  // of 1 x 1 K, 1 x 8 K and 8 x 4 K where forced plans measured them fastest (8, 32 and 8 splits; docs/CUDA_DESIGN.md,
  // "Decode attention: the split plan"). Not measured for the bf16 kernels, which keep their plans.
  const int64_t merge_per_split = fp8 ? 5 : 0;
  int64_t best_tiles = tiles, best_cost = std::numeric_limits<int64_t>::max();
  for (int64_t splits = 1; splits <= max_splits; ++splits) {
    const int64_t tiles_per_split = (tiles + splits - 1) / splits;
    const int64_t used_splits = (tiles + tiles_per_split - 1) / tiles_per_split;
    const int64_t cost = plan_cost(pairs * used_splits, capacity, tiles_per_split, used_splits, merge_per_split);
    if (cost < best_cost) {
      best_cost = cost;
      best_tiles = tiles_per_split;
    }
  }
  p.tokens_per_split = static_cast<int>(best_tiles * kTileTokens);
  p.num_splits = static_cast<int>((tiles + best_tiles - 1) / best_tiles);
}

int decode_attention_max_split_rows(int max_decode, int num_sms) { return max_decode + 4 * num_sms; }

void launch_decode_attention(const DecodeAttentionParams& params, const KernelStream& stream,
                             DecodeAttentionKernel kernel) {
  if (params.num_decode == 0) return;
  QINFER_CHECK(params.num_heads % params.num_kv_heads == 0 && params.num_heads / params.num_kv_heads <= kGroupRows &&
               params.tokens_per_split % kTileTokens == 0);
  const bool fp8 = params.k_fp8 != nullptr;
  kernel = resolve_auto(params, kernel, stream.device);
  with_head_dim(params.head_dim, [&](auto dim) {
    constexpr int kHeadDim = decltype(dim)::value;
    if (runs_fp8_bulk_copy(params, kernel, stream.device))
      launch_decode_attention_fp8_bulk_copy(params, stream);
    else if (fp8 && kernel == DecodeAttentionKernel::kRegisters)
      launch_decode_attention_fp8_registers(params, stream);
    else if (fp8)
      launch_decode_attention_fp8(params, stream);
    else if (kernel == DecodeAttentionKernel::kBulkCopy)
      launch_decode_attention_bulk_copy(params, stream);
    else if (kernel == DecodeAttentionKernel::kBulkCopyTwoStage)
      launch_decode_attention_bulk_copy(params, stream, 2);
    else if (kernel == DecodeAttentionKernel::kRegisters)
      launch_decode_attention_registers(params, stream);
    else
      launch_for_head_dim<kHeadDim>(params, stream);
    if (params.num_splits > 1 && params.split_counters == nullptr)
      launch_dependent(merge_splits_kernel<kHeadDim>, dim3(params.num_kv_heads, params.num_decode), kThreads, 0, stream,
                       params);
  });
}

}  // namespace qinfer::cuda
