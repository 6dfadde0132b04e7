#include "backend/cuda/kernels/decode_attention/plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backend/cuda/kernels/decode_attention/geometry.h"

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

// Estimated cost of a plan in 32nds of a tile per resident slot (docs/CUDA_DESIGN.md, "Decode attention: the split
// plan"): full or partial waves of blocks times (tiles per block plus about two tiles' worth of pipeline fill and merge
// per block), plus `merge_per_split` for each split of a sequence (the last block of each (sequence, KV head) merges
// the splits one after another).
int64_t plan_cost(int64_t blocks, int64_t capacity, int64_t tiles_per_block, int64_t splits, int64_t merge_per_split) {
  constexpr int64_t kBlockOverheadTiles = 2;
  return (blocks + capacity - 1) / capacity * (tiles_per_block + kBlockOverheadTiles) * 32 + splits * merge_per_split;
}

bool is_fp8(const DecodeAttentionShape& shape) { return shape.kv_dtype == KvCacheDtype::kFp8E4m3; }

}  // namespace

int decode_attention_register_context(int num_decode, KvCacheDtype kv_dtype) {
  // Measured on the H200 (docs/CUDA_DESIGN.md, "Decode attention: which kernel"; contexts are the graphs'
  // power-of-two buckets): 1-2 sequences keep the register kernel up to 8 K (bf16 2 x 8 K+: bulk copy 3.97 against 4.29
  // ms per step), 3-4 up to 2 K over bf16 and 8 K over fp8 (which reads half the bytes per key). Over fp8, 1-2
  // sequences keep it up to 16 K: at 32 K it loses (one sequence, kernel alone: 1.71 against the bulk-copy
  // kernel's 2.19 TB/s; at 128 K 2.26 against 3.32).
  const bool fp8 = kv_dtype == KvCacheDtype::kFp8E4m3;
  if (num_decode <= 2) return fp8 ? 16384 : 8192;
  return fp8 ? 8192 : 2048;
}

DecodeAttentionKernel decode_attention_auto_kernel(const DecodeAttentionShape& shape, int planned_context,
                                                   const DecodeAttentionGpu& gpu) {
  if (shape.num_decode <= kDecodeAttentionRegisterBatch &&
      planned_context <= decode_attention_register_context(shape.num_decode, shape.kv_dtype))
    return DecodeAttentionKernel::kRegisters;
  if (gpu.bulk_copy)
    return !is_fp8(shape) && shape.num_decode <= kDecodeAttentionTwoStageBatch
               ? DecodeAttentionKernel::kBulkCopyTwoStage
               : DecodeAttentionKernel::kBulkCopy;
  return DecodeAttentionKernel::kCpAsync;
}

DecodeAttentionKernel decode_attention_resolved_kernel(const DecodeAttentionShape& shape,
                                                       const DecodeAttentionPlan& plan, const DecodeAttentionGpu& gpu) {
  if (plan.kernel == DecodeAttentionKernel::kAuto)
    return decode_attention_auto_kernel(shape, plan.planned_context, gpu);
  if (plan.kernel == DecodeAttentionKernel::kBulkCopyTwoStage && is_fp8(shape)) return DecodeAttentionKernel::kBulkCopy;
  return plan.kernel;
}

bool decode_attention_runs_fp8_bulk_copy(const DecodeAttentionShape& shape, DecodeAttentionKernel kernel) {
  return is_fp8(shape) && kernel == DecodeAttentionKernel::kBulkCopy && shape.head_dim == 128 &&
         fp8_head_blocks(shape.num_heads / shape.num_kv_heads) == 1;
}

DecodeAttentionPlan plan_decode_attention(const DecodeAttentionShape& shape, int max_context_len,
                                          const DecodeAttentionGpu& gpu) {
  DecodeAttentionPlan plan{.kernel = decode_attention_auto_kernel(shape, max_context_len, gpu),
                           .planned_context = max_context_len};
  const int num_sms = gpu.num_sms;
  const int64_t pairs = static_cast<int64_t>(shape.num_decode) * shape.num_kv_heads;
  const bool fp8 = is_fp8(shape), fp8_bulk = decode_attention_runs_fp8_bulk_copy(shape, plan.kernel);
  const bool two_stage = plan.kernel == DecodeAttentionKernel::kBulkCopyTwoStage;
  const int64_t capacity =
      static_cast<int64_t>(num_sms) * (shape.head_dim == 64 ? resident_blocks_per_sm<64>(fp8, fp8_bulk, two_stage)
                                                            : resident_blocks_per_sm<128>(fp8, fp8_bulk, two_stage));
  const int64_t tiles = std::max<int64_t>(1, (max_context_len + kTileTokens - 1) / kTileTokens);
  // num_decode * num_splits stays within decode_attention_max_split_rows.
  const int64_t max_splits =
      std::min<int64_t>(tiles, (static_cast<int64_t>(shape.num_decode) + 4 * num_sms) / std::max(1, shape.num_decode));
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
  plan.tokens_per_split = static_cast<int>(best_tiles * kTileTokens);
  plan.num_splits = static_cast<int>((tiles + best_tiles - 1) / best_tiles);
  return plan;
}

int decode_attention_max_split_rows(int max_decode, int num_sms) { return max_decode + 4 * num_sms; }

}  // namespace qinfer::cuda
