// Kernel microbenchmarks on Qwen3-4B shapes: decode GEMV (GB/s vs the 4.27 TB/s copy ceiling), cuBLASLt for
// comparison and for prefill GEMMs (TFLOP/s vs 788), paged decode attention (K+V read bandwidth), causal paged
// prefill attention (TFLOP/s), the fp8 KV cache's dequantising gather (bytes moved). Prints one line per measurement
// and a summary table last.
// The Bench class: one measurement group per member, defined in kernel_bench_linear.cpp, kernel_bench_attention.cpp
// and kernel_bench_step.cpp; main() in kernel_bench.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels/decode_attention/launch.h"
#include "backend/cuda/kernels/embedding.h"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "backend/cuda/kernels/quantized_gemv.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/kernels/swiglu.h"
#include "backend/cuda/quantized_weight_layout.h"
#include "bench_timer.h"
#include "fill_random.h"

namespace qinfer::cuda::bench {

constexpr double kCopyCeiling = 4.27e12;   // bytes/s, measured H200 device copy (read + write)
constexpr double kMatmulCeiling = 788e12;  // FLOP/s, measured H200 bf16 GEMM
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128;

// A device copy of a host vector (bench inputs: tables, metadata, parameters).
template <typename T>
DeviceBuffer device_copy(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T), "bench");
  CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

struct Row {
  std::string kernel, shape;
  double seconds;
  double rate;  // bytes/s or FLOP/s
  bool bandwidth;
};

class Bench {
 public:
  Bench() { CUDA_CHECK(cudaStreamCreate(&stream_)); }
  ~Bench() { cudaStreamDestroy(stream_); }
  void record(const std::string& kernel, const std::string& shape, double seconds, double amount, bool bandwidth);
  void copy_ceiling();
  // One decode linear layer: GEMV and the tensor-core GEMV (its default launch shape, or every shape with
  // sweep_mma) for 1..16 rows, and cuBLASLt; weights rotated beyond L2. With swiglu the layer is gate_up and each
  // kernel ends in SwiGLU (cuBLASLt followed by the SwiGLU kernel).
  void linear(const char* name, int n, int k, const std::vector<int>& rows_list, bool sweep_mma = false,
              bool swiglu = false);
  // The same over a quantized weight of `format` (groups of 128): the quantized GEMV (its default launch shape, or
  // every one with sweep_shapes) for rows up to 16, and dequantize + cuBLASLt for every row count.
  void quantized_linear(const char* name, QuantizedFormat format, int n, int k, const std::vector<int>& rows_list,
                        bool sweep_shapes = false, bool swiglu = false);
  // Prefill GEMM rate at large M.
  void prefill_gemm(const char* name, int m, int n, int k);
  // A paged KV pool for `sequences` sequences of `context` tokens; block tables scattered over the pool, or in pool
  // order (each sequence's K and V one contiguous run per KV head block).
  struct Pool {
    DeviceBuffer k, v, tables;
    int stride = 0;
    int num_blocks = 0;
  };
  Pool make_pool(int sequences, int context, bool scattered = true);
  // Buffers and params of decode attention for `sequences` one-token queries over `pool` (table row s for sequence s,
  // every context `context` tokens).
  struct DecodeSetup {
    DeviceBuffer rows, lens, split_out, split_lse, counters;
    DecodeAttentionParams p;
    DecodeAttentionPlan plan;
  };
  DecodeSetup make_decode_setup(const Pool& pool, int sequences, int context, const DeviceBuffer& q, DeviceBuffer& out,
                                bool merge_in_kernel = true);
  // merge_in_kernel: splits merged by the last block of each (sequence, KV head) through arrival counters, as the
  // backend runs it; otherwise by the second kernel. fp8_split_tokens: tokens per split (multiples of 64) to time the
  // fp8 kernel with besides the planned one, to check the planner.
  void decode_attention(int sequences, int context, bool merge_in_kernel = true, bool scattered = true,
                        const std::vector<int>& fp8_split_tokens = {});
  // One causal prompt of `length` new tokens over `pool` (its first table row); meta holds {table row, q start, q len,
  // cached} = {0, 0, length, 0}.
  static PrefillAttentionParams one_prompt_attention(const Pool& pool, const DeviceBuffer& q, DeviceBuffer& out,
                                                     const DeviceBuffer& meta, int length);
  // Both prefill kernels on the same data (the wgmma one where the device has it).
  void prefill_attention(int length);
  // One step's kernels at `tokens` rows (Qwen3-4B shapes), each timed alone, then the layer's chain in order as one
  // graph: the per-kernel breakdown of a step (x 36 layers + embedding; + lm_head for decode). decode_context 0: one
  // prompt of `tokens` tokens (prefill); else `tokens` sequences of decode_context tokens each, one new token each,
  // with the linears through cuBLASLt.
  void layer_breakdown(int tokens, int decode_context);
  // Dequantising gather of one layer's fp8 K/V for a prefill of `context` tokens (block 16) into a bf16 scratch.
  // Bytes: fp8 data and scales read, bf16 written. Four disjoint scattered block lists rotate over a pool of 4x the
  // context so that the reads do not come from L2.
  void kv_gather(int context);
  // The small per-layer kernels of a batch-1 decode step, timed as graph replays (what a decode graph pays).
  void decode_small_ops();
  // GPU sampling of `rows` rows of 151936 logits with the given parameters (bytes: one read of the logits), uniform in
  // +-8, with `spikes`: every 997th logit 10 higher. Each row gets `history` distinct penalised tokens (spread over the
  // vocabulary, every third one also in the output).
  void sampling(const char* name, int rows, const DeviceSamplingParams& params, int history = 0, bool spikes = false);
  void summary() const;

 private:
  static void print(const Row& r);
  static void print_table_row(const Row& r);
  static std::string rate_text(const Row& r, const char* separator = "  ");
  KernelStream kernel_stream() const { return {stream_, device_}; }
  DeviceCapabilities device_ = query_device_capabilities();
  cudaStream_t stream_ = nullptr;
  CublasLtGemm gemm_;
  std::vector<Row> rows_;
};

}  // namespace qinfer::cuda::bench
