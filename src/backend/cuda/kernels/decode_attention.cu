#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/device_math.cuh"

namespace qinfer::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // tokens per lane group per iteration: 2 * kUnroll 16-byte loads in flight
constexpr float kLog2e = 1.4426950408889634f;

// Running softmax state of one lane for kGroup query heads over the tokens it has seen (log2 domain).
template <int kGroup>
struct SoftmaxState {
  float max[kGroup];
  float sum[kGroup];
  float acc[kGroup][8];
};

__device__ __forceinline__ float rescale_factor(float old_max, float new_max) {
  return old_max == -INFINITY ? 0.0f : exp2f(old_max - new_max);
}

template <int kGroup>
__device__ __forceinline__ void merge_state(SoftmaxState<kGroup>& s, const float (&other_max)[kGroup],
                                            const float (&other_sum)[kGroup], const float (&other_acc)[kGroup][8]) {
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const float m = fmaxf(s.max[g], other_max[g]);
    const float a = rescale_factor(s.max[g], m), b = rescale_factor(other_max[g], m);
    s.sum[g] = s.sum[g] * a + other_sum[g] * b;
#pragma unroll
    for (int j = 0; j < 8; ++j) s.acc[g][j] = s.acc[g][j] * a + other_acc[g][j] * b;
    s.max[g] = m;
  }
}

// grid (num_splits, num_kv_heads, num_decode). A lane group of kHeadDim/8 lanes owns one token at a time and eight
// dimensions of it; kGroup >= the real group size, extra heads are computed on a clamped head and not stored.
template <int kHeadDim, int kGroup>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(DecodeAttentionParams p) {
  constexpr int kLanesPerToken = kHeadDim / 8;
  constexpr int kTokensPerWarp = 32 / kLanesPerToken;
  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane / kLanesPerToken, dim = (lane % kLanesPerToken) * 8;
  const int group = p.num_heads / p.num_kv_heads;
  const int context_len = p.context_lens[seq];
  const int begin = split * p.tokens_per_split;
  const int end = min(context_len, begin + p.tokens_per_split);
  const int32_t* block_table = p.block_tables + static_cast<int64_t>(p.table_rows[seq]) * p.block_table_stride;
  const int q_row = p.q_rows[seq];

  float q[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const int head = kv_head * group + min(g, group - 1);
    Bf16x8 v;
    v.raw = *reinterpret_cast<const uint4*>(p.q + (static_cast<int64_t>(q_row) * p.num_heads + head) * kHeadDim + dim);
    bf16x8_to_float(v, q[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] *= p.scale * kLog2e;
  }

  SoftmaxState<kGroup> state;
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    state.max[g] = -INFINITY;
    state.sum[g] = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) state.acc[g][j] = 0;
  }

  constexpr int kTokensPerIteration = kWarps * kTokensPerWarp * kUnroll;
  // The whole warp iterates together (the score reduction shuffles across it); tokens past `end` are masked.
  for (int warp_base = begin + warp * kTokensPerWarp * kUnroll; warp_base < end; warp_base += kTokensPerIteration) {
    const int base = warp_base + sub * kUnroll;
    uint4 k_raw[kUnroll] = {}, v_raw[kUnroll] = {};
    if (base < end) {
      // The kUnroll tokens from `base` (a multiple of kUnroll) lie in one page: block_size is a multiple of 16.
      const int64_t page = block_table[base / p.block_size];
      const __nv_bfloat16* k_first =
          p.k_cache + ((page * p.num_kv_heads + kv_head) * p.block_size + base % p.block_size) * kHeadDim + dim;
      const __nv_bfloat16* v_first = p.v_cache + (k_first - p.k_cache);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (base + u < end) {
          k_raw[u] = load_streaming(k_first + u * kHeadDim);
          v_raw[u] = load_streaming(v_first + u * kHeadDim);
        }
      }
    }
    float scores[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      Bf16x8 kv;
      kv.raw = k_raw[u];
      float kf[8];
      bf16x8_to_float(kv, kf);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float dot = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot = fmaf(q[g][j], kf[j], dot);
#pragma unroll
        for (int offset = 1; offset < kLanesPerToken; offset <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        scores[u][g] = base + u < end ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float m = state.max[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) m = fmaxf(m, scores[u][g]);
      const float a = rescale_factor(state.max[g], m);
      state.sum[g] *= a;
#pragma unroll
      for (int j = 0; j < 8; ++j) state.acc[g][j] *= a;
      state.max[g] = m;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u >= end) break;
      Bf16x8 vv;
      vv.raw = v_raw[u];
      float vf[8];
      bf16x8_to_float(vv, vf);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float weight = exp2f(scores[u][g] - state.max[g]);
        state.sum[g] += weight;
#pragma unroll
        for (int j = 0; j < 8; ++j) state.acc[g][j] = fmaf(weight, vf[j], state.acc[g][j]);
      }
    }
  }

  // Merge the lane groups of the warp (lanes holding the same dimensions), then the warps through shared memory.
#pragma unroll
  for (int offset = kLanesPerToken; offset < 32; offset <<= 1) {
    float other_max[kGroup], other_sum[kGroup], other_acc[kGroup][8];
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      other_max[g] = __shfl_xor_sync(0xffffffffu, state.max[g], offset);
      other_sum[g] = __shfl_xor_sync(0xffffffffu, state.sum[g], offset);
#pragma unroll
      for (int j = 0; j < 8; ++j) other_acc[g][j] = __shfl_xor_sync(0xffffffffu, state.acc[g][j], offset);
    }
    merge_state(state, other_max, other_sum, other_acc);
  }
  __shared__ float warp_max[kWarps][kGroup], warp_sum[kWarps][kGroup], warp_acc[kWarps][kGroup][kHeadDim];
  if (lane < kLanesPerToken) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      warp_max[warp][g] = state.max[g];
      warp_sum[warp][g] = state.sum[g];
#pragma unroll
      for (int j = 0; j < 8; ++j) warp_acc[warp][g][dim + j] = state.acc[g][j];
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < group * kHeadDim && index < kGroup * kHeadDim; index += kThreads) {
    const int g = index / kHeadDim, d = index % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_max[w][g]);
    float sum = 0, acc = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float a = rescale_factor(warp_max[w][g], m);
      sum += warp_sum[w][g] * a;
      acc += warp_acc[w][g][d] * a;
    }
    const int head = kv_head * group + g;
    const float value = sum > 0 ? acc / sum : 0.0f;
    if (p.num_splits == 1) {
      p.out[(static_cast<int64_t>(q_row) * p.num_heads + head) * kHeadDim + d] = __float2bfloat16(value);
    } else {
      const int64_t split_index = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits + split;
      p.split_out[split_index * kHeadDim + d] = value;
      if (d == 0) p.split_lse[split_index] = sum > 0 ? m + log2f(sum) : -INFINITY;
    }
  }
}

// grid (num_decode, num_heads), head_dim threads: weights each split's normalised output by 2^(lse - max).
__global__ void merge_splits_kernel(DecodeAttentionParams p) {
  const int seq = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
  float m = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, p.split_lse[first + s]);
  float sum = 0, acc = 0;
  for (int s = 0; s < p.num_splits; ++s) {
    const float w = rescale_factor(p.split_lse[first + s], m);
    sum += w;
    acc += w * p.split_out[(first + s) * p.head_dim + d];
  }
  p.out[(static_cast<int64_t>(p.q_rows[seq]) * p.num_heads + head) * p.head_dim + d] =
      __float2bfloat16(sum > 0 ? acc / sum : 0.0f);
}

template <int kHeadDim>
void launch_for_head_dim(const DecodeAttentionParams& p, dim3 grid, cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  if (group == 1)
    decode_attention_kernel<kHeadDim, 1><<<grid, kThreads, 0, stream>>>(p);
  else if (group == 2)
    decode_attention_kernel<kHeadDim, 2><<<grid, kThreads, 0, stream>>>(p);
  else if (group <= 4)
    decode_attention_kernel<kHeadDim, 4><<<grid, kThreads, 0, stream>>>(p);
  else if (group <= 8)
    decode_attention_kernel<kHeadDim, 8><<<grid, kThreads, 0, stream>>>(p);
  else
    QINFER_CHECK(false, "GQA group larger than 8 is not supported");
}

}  // namespace

void plan_decode_attention_splits(DecodeAttentionParams& p, int max_context_len, int num_sms) {
  const int64_t blocks_without_split = static_cast<int64_t>(p.num_decode) * p.num_kv_heads;
  const int64_t wanted_splits = std::max<int64_t>(1, (2 * num_sms + blocks_without_split - 1) / blocks_without_split);
  // At least 64 tokens per split: below that the merge costs more than the parallelism gains.
  const int min_tokens = std::max(64, p.block_size);
  int tokens = static_cast<int>((max_context_len + wanted_splits - 1) / wanted_splits);
  tokens = std::max(tokens, min_tokens);
  tokens = (tokens + p.block_size - 1) / p.block_size * p.block_size;
  p.tokens_per_split = tokens;
  p.num_splits = std::max(1, (max_context_len + tokens - 1) / tokens);
}

void launch_decode_attention(const DecodeAttentionParams& params, cudaStream_t stream) {
  if (params.num_decode == 0) return;
  QINFER_CHECK(params.num_heads % params.num_kv_heads == 0 && params.tokens_per_split > 0);
  const dim3 grid(params.num_splits, params.num_kv_heads, params.num_decode);
  if (params.head_dim == 128)
    launch_for_head_dim<128>(params, grid, stream);
  else if (params.head_dim == 64)
    launch_for_head_dim<64>(params, grid, stream);
  else
    QINFER_CHECK(false, "head_dim must be 64 or 128");
  CUDA_CHECK_LAUNCH();
  if (params.num_splits > 1) {
    merge_splits_kernel<<<dim3(params.num_decode, params.num_heads), params.head_dim, 0, stream>>>(params);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace qinfer::cuda
