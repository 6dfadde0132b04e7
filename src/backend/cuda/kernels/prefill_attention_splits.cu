// Key splits of the prefill attention (prefill_attention.h, PrefillAttentionParams::kv_splits): how many, and the
// merge of the splits' partial rows. Split s of a row holds its attention over the split's keys, normalised, and the
// log2-sum-exp of its scores (scaled, log2 domain); the merged row is sum_s 2^(lse_s - m) o_s / sum_s 2^(lse_s - m)
// with m the largest lse_s, the same combination the decode attention's splits use.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/prefill_attention_plan.h"
#include "backend/cuda/kernels/prefill_attention_splits.h"

namespace qinfer::cuda {

namespace {

constexpr int kMergeThreads = 128;

// grid (max_q_len, num_prefill): one block per query row of a prefill sequence, every head; threads over
// (head, 4 dimensions).
__global__ void __launch_bounds__(kMergeThreads) merge_prefill_attention_splits_kernel(const PrefillAttentionParams p) {
  const int seq = blockIdx.y, q_index = blockIdx.x;
  if (q_index >= p.q_lens[seq]) return;
  const int64_t token = p.q_starts[seq] + q_index;
  const int quads = p.head_dim / 4;
  for (int item = threadIdx.x; item < p.num_heads * quads; item += kMergeThreads) {
    const int head = item / quads, quad = item % quads;
    float max_lse = -INFINITY;
    for (int s = 0; s < p.kv_splits; ++s)
      max_lse = fmaxf(max_lse, p.split_lse[(s * static_cast<int64_t>(p.num_tokens) + token) * p.num_heads + head]);
    float4 sum = make_float4(0, 0, 0, 0);
    float weight_sum = 0;
    for (int s = 0; s < p.kv_splits; ++s) {
      const int64_t row = (s * static_cast<int64_t>(p.num_tokens) + token) * p.num_heads + head;
      const float lse = p.split_lse[row];
      if (lse == -INFINITY) continue;  // no key of this split precedes the row (causal)
      const float weight = exp2f(lse - max_lse);
      const float4 o = reinterpret_cast<const float4*>(p.split_out + row * p.head_dim)[quad];
      sum.x += weight * o.x;
      sum.y += weight * o.y;
      sum.z += weight * o.z;
      sum.w += weight * o.w;
      weight_sum += weight;
    }
    const float inv = weight_sum > 0 ? 1.0f / weight_sum : 0.0f;
    __nv_bfloat162* dst =
        reinterpret_cast<__nv_bfloat162*>(p.out + (token * p.num_heads + head) * p.head_dim + quad * 4);
    dst[0] = __floats2bfloat162_rn(sum.x * inv, sum.y * inv);
    dst[1] = __floats2bfloat162_rn(sum.z * inv, sum.w * inv);
  }
}

}  // namespace

int prefill_attention_kv_splits(const PrefillAttentionParams& p, int num_sms) {
  if (p.split_out == nullptr || p.split_lse == nullptr) return 1;
  return plan_prefill_attention_kv_splits({.num_heads = p.num_heads,
                                           .num_prefill = p.num_prefill,
                                           .max_q_len = p.max_q_len,
                                           .max_context_len = p.max_context_len,
                                           .num_tokens = p.num_tokens,
                                           .split_rows_capacity = p.split_rows_capacity},
                                          num_sms);
}

void launch_merge_prefill_attention_splits(const PrefillAttentionParams& p, cudaStream_t stream) {
  QINFER_CHECK(p.kv_splits > 1 && p.head_dim % 4 == 0);
  QINFER_CHECK(static_cast<int64_t>(p.kv_splits) * p.num_tokens <= p.split_rows_capacity,
               "prefill attention: kv_splits x num_tokens exceeds the split buffers");
  merge_prefill_attention_splits_kernel<<<dim3(p.max_q_len, p.num_prefill), kMergeThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda
