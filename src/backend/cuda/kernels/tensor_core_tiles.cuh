// Building blocks of the tensor-core attention kernels (sm_80+): swizzled shared-memory tiles filled by cp.async from
// the paged KV cache, ldmatrix fragment loads and the bf16 m16n8k16 mma.sync.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qinfer::cuda {

// Shared-memory tiles are [rows][head_dim] bf16 with the 16-byte chunk index XOR-swizzled by (row % 8), so that the
// eight row addresses of an ldmatrix phase fall into different banks.
template <int kHeadDim>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// 16-byte asynchronous global -> shared copy; zero-fills the destination when !valid.
__device__ __forceinline__ void cp_async_16(void* smem, const void* global, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
// Waits until at most kPending of this thread's most recent cp.async groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a * b for one m16n8k16 tile (bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a * b for one m16n8k16 tile (fp16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Starts copying kTokens keys and values of one KV head, from token `first` of a sequence, into swizzled tiles.
// Tokens at or past `end` are zero-filled. Each thread owns one 16-byte chunk column and looks up the page of each
// of its rows once for both K and V. Cache layout: [num_blocks, num_kv_heads, block_size, head_dim].
template <int kHeadDim, int kThreads, int kTokens>
__device__ __forceinline__ void load_kv_tiles(__nv_bfloat16* k_tile, __nv_bfloat16* v_tile,
                                              const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                                              const int32_t* block_table, int first, int end, int kv_head,
                                              int num_kv_heads, int block_size) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kRowsPerPass = kThreads / kChunks;
  const int chunk = threadIdx.x % kChunks;
#pragma unroll
  for (int row = threadIdx.x / kChunks; row < kTokens; row += kRowsPerPass) {
    const int token = first + row;
    const bool valid = token < end;
    int64_t offset = 0;
    if (valid) {
      const int64_t page = block_table[token / block_size];
      offset = ((page * num_kv_heads + kv_head) * block_size + token % block_size) * kHeadDim + chunk * 8;
    }
    cp_async_16(k_tile + swizzle<kHeadDim>(row, chunk), k_cache + offset, valid);
    cp_async_16(v_tile + swizzle<kHeadDim>(row, chunk), v_cache + offset, valid);
  }
}

// One online-softmax step over a tile of (scaled, masked, log2-domain) scores in the m16n8 accumulator layout: this
// thread's rows are lane/4 and lane/4 + 8, `tile_max` its partial row maxima over the tile. Updates the running row
// max and sum, rescales the output accumulators and turns the scores into probabilities.
template <int kScoreBlocks, int kOutBlocks>
__device__ __forceinline__ void online_softmax_step(float (&s)[kScoreBlocks][4], float (&tile_max)[2],
                                                    float (&row_max)[2], float (&row_sum)[2],
                                                    float (&o)[kOutBlocks][4]) {
  float correction[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = fmaxf(row_max[r], tile_max[r]);
    correction[r] = row_max[r] == -INFINITY ? 0.0f : exp2f(row_max[r] - new_max);
    row_max[r] = new_max;
    row_sum[r] *= correction[r];
  }
#pragma unroll
  for (int nb = 0; nb < kOutBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nb][e] *= correction[e / 2];
#pragma unroll
  for (int nb = 0; nb < kScoreBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float m = row_max[e / 2];
      const float prob = m == -INFINITY ? 0.0f : exp2f(s[nb][e] - m);
      s[nb][e] = prob;
      row_sum[e / 2] += prob;
    }
}

// Completes this thread's two running row sums (rows lane / 4 and + 8 of its warp) over the 4 lanes of each row.
__device__ __forceinline__ void reduce_row_sums(float (&row_sum)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
}

// Normalises and stores one thread's two output rows of an m16n8-layout accumulator: rows `first_row` and
// `first_row` + 8 of the sequence's new tokens (skipped at or past q_len), columns 8 * block + 2 * (lane % 4) + {0, 1};
// `row_sum` holds this thread's partial sums, completed here over the 4 lanes of each row.
// out: [num_tokens, num_heads, kHeadDim], the sequence's first row at q_start.
template <int kHeadDim>
__device__ __forceinline__ void store_attention_rows(const float (&o)[kHeadDim / 8][4], float (&row_sum)[2],
                                                     __nv_bfloat16* out, int num_heads, int head, int q_start,
                                                     int q_len, int first_row) {
  const int lane = threadIdx.x % 32;
  reduce_row_sums(row_sum);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q_index = first_row + r * 8;
    if (q_index >= q_len) continue;
    const float inv_sum = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;
    __nv_bfloat16* dst = out + (static_cast<int64_t>(q_start + q_index) * num_heads + head) * kHeadDim;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
      *reinterpret_cast<__nv_bfloat162*>(dst + nb * 8 + (lane % 4) * 2) =
          __floats2bfloat162_rn(o[nb][2 * r] * inv_sum, o[nb][2 * r + 1] * inv_sum);
  }
}

}  // namespace qinfer::cuda
