// launch_decode_attention: the checks of a launch's modes and plan, the dispatch to the family's kernels
// (launchers.h), and the kernel that merges splits when the attention kernel does not.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/block.cuh"
#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/decode_attention/launchers.h"
#include "backend/cuda/kernels/head_dim_dispatch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qinfer::cuda {

namespace {

using namespace decode_block;

// grid (num_kv_heads, num_decode): merges the splits of one GQA group when they are not merged in the kernel (a
// sequence with one active split got its output from the attention kernel).
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) merge_splits_kernel(DecodeAttentionArgs p) {
  allow_dependents();
  wait_for_producer();
  const int group = p.num_heads / p.num_kv_heads, splits = active_splits(p, p.context_lens[blockIdx.y]);
  if (splits > 1) merge_group_splits<kHeadDim>(p, blockIdx.y, blockIdx.x * group, group, splits);
}

// Each mode of the params has the pointers it reads, and the plan's splits are whole tiles.
void check_launch(const DecodeAttentionParams& p, const DecodeAttentionPlan& plan) {
  QINFER_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.num_heads / p.num_kv_heads <= kGroupRows,
               "decode attention needs GQA groups of at most 16 query heads");
  QINFER_CHECK(plan.tokens_per_split > 0 && plan.tokens_per_split % kTileTokens == 0 && plan.num_splits >= 1,
               "a decode attention plan splits contexts into whole 64-token tiles");
  if (p.kv_dtype == KvCacheDtype::kFp8E4m3)
    QINFER_CHECK(p.k_fp8 != nullptr && p.v_fp8 != nullptr && p.k_scales != nullptr && p.v_scales != nullptr,
                 "decode attention over an fp8 cache (kv_dtype kFp8E4m3) needs k_fp8, v_fp8, k_scales and v_scales");
  else
    QINFER_CHECK(p.k_cache != nullptr && p.v_cache != nullptr,
                 "decode attention over a bf16 cache (kv_dtype kBf16) needs k_cache and v_cache");
  if (p.fuse_rope) {
    const QkNormRopeCacheWriteParams& r = p.rope;
    const bool cache = p.kv_dtype == KvCacheDtype::kFp8E4m3
                           ? r.k_fp8 != nullptr && r.v_fp8 != nullptr && r.k_scales != nullptr && r.v_scales != nullptr
                           : r.k_cache != nullptr && r.v_cache != nullptr;
    QINFER_CHECK(r.qkv != nullptr && r.positions != nullptr && r.slots != nullptr && r.inv_freq != nullptr &&
                     r.q_norm != nullptr && r.k_norm != nullptr && cache,
                 "decode attention with fuse_rope needs rope's qkv, positions, slots, RoPE table, norm weights and "
                 "the cache pointers of kv_dtype");
  }
  if (plan.num_splits > 1)
    QINFER_CHECK(p.split_out != nullptr && p.split_lse != nullptr,
                 "decode attention with more than one split needs split_out and split_lse");
  if (p.merge_in_kernel)
    QINFER_CHECK(p.split_counters != nullptr, "decode attention with merge_in_kernel needs split_counters");
}

}  // namespace

// Field by field: the CUDA sources are C++17, without designated initialisers.
DecodeAttentionShape decode_attention_shape(const DecodeAttentionParams& p) {
  DecodeAttentionShape shape;
  shape.num_decode = p.num_decode;
  shape.num_heads = p.num_heads;
  shape.num_kv_heads = p.num_kv_heads;
  shape.head_dim = p.head_dim;
  shape.kv_dtype = p.kv_dtype;
  return shape;
}

DecodeAttentionGpu decode_attention_gpu(const DecodeAttentionParams& p, const DeviceCapabilities& device) {
  DecodeAttentionGpu gpu;
  gpu.num_sms = device.num_sms;
  gpu.bulk_copy = decode_attention_bulk_copy_available(p, device);
  return gpu;
}

DecodeAttentionPlan plan_decode_attention(const DecodeAttentionParams& p, int max_context_len,
                                          const DeviceCapabilities& device) {
  return plan_decode_attention(decode_attention_shape(p), max_context_len, decode_attention_gpu(p, device));
}

void launch_decode_attention(const DecodeAttentionParams& params, const DecodeAttentionPlan& plan,
                             const KernelStream& stream) {
  if (params.num_decode == 0) return;
  check_launch(params, plan);
  const DecodeAttentionShape shape = decode_attention_shape(params);
  const DecodeAttentionKernel kernel =
      decode_attention_resolved_kernel(shape, plan, decode_attention_gpu(params, stream.device));
  const bool fp8 = params.kv_dtype == KvCacheDtype::kFp8E4m3;
  const DecodeAttentionArgs args{params, plan.tokens_per_split, plan.num_splits};
  if (decode_attention_runs_fp8_bulk_copy(shape, kernel))
    launch_decode_attention_fp8_bulk_copy(args, stream);
  else if (fp8 && kernel == DecodeAttentionKernel::kRegisters)
    launch_decode_attention_fp8_registers(args, stream);
  else if (fp8)
    launch_decode_attention_fp8(args, stream);
  else if (kernel == DecodeAttentionKernel::kBulkCopy)
    launch_decode_attention_bulk_copy(args, stream, kStages);
  else if (kernel == DecodeAttentionKernel::kBulkCopyTwoStage)
    launch_decode_attention_bulk_copy(args, stream, 2);
  else if (kernel == DecodeAttentionKernel::kRegisters)
    launch_decode_attention_registers(args, stream);
  else
    launch_decode_attention_cp_async(args, stream);
  if (args.num_splits > 1 && !args.merge_in_kernel)
    with_head_dim(args.head_dim, [&](auto dim) {
      launch_dependent(merge_splits_kernel<decltype(dim)::value>, dim3(args.num_kv_heads, args.num_decode), kThreads, 0,
                       stream, args);
    });
}

}  // namespace qinfer::cuda
