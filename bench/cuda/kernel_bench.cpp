// Kernel microbenchmarks on Qwen3-4B shapes: decode GEMV (GB/s vs the 4.27 TB/s copy ceiling), cuBLASLt for
// comparison and for prefill GEMMs (TFLOP/s vs 788), paged decode attention (K+V read bandwidth), causal paged
// prefill attention (TFLOP/s), the fp8 KV cache's dequantising gather (bytes moved). Prints one line per measurement
// and a summary table last.
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
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/embedding.h"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/kernels/swiglu.h"
#include "bench_timer.h"
#include "fill_random.h"

namespace qinfer::cuda::bench {
namespace {

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

  void record(const std::string& kernel, const std::string& shape, double seconds, double amount, bool bandwidth) {
    const Row row{kernel, shape, seconds, amount / seconds, bandwidth};
    print(row);
    rows_.push_back(row);
  }

  void copy_ceiling() {
    const size_t bytes = size_t{2} << 30;
    DeviceBuffer a(bytes, "bench"), b(bytes, "bench");
    fill_random_bf16(a.as<__nv_bfloat16>(), bytes / 2, 1, 1.0f, stream_);
    const double t = time_per_call(
        [&](int) { CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream_)); }, 5,
        stream_);
    record("device copy", "2 GiB", t, 2.0 * static_cast<double>(bytes), true);
  }

  // One decode linear layer: GEMV and the tensor-core GEMV (its default launch shape, or every shape with
  // sweep_mma) for 1..16 rows, and cuBLASLt; weights rotated beyond L2. With swiglu the layer is gate_up and each
  // kernel ends in SwiGLU (cuBLASLt followed by the SwiGLU kernel).
  void linear(const char* name, int n, int k, const std::vector<int>& rows_list, bool sweep_mma = false,
              bool swiglu = false) {
    const size_t weight_bytes = static_cast<size_t>(n) * k * 2;
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / weight_bytes));
    std::vector<DeviceBuffer> weights;
    for (int c = 0; c < copies; ++c) {
      weights.emplace_back(weight_bytes, "bench weights");
      fill_random_bf16(weights.back().as<__nv_bfloat16>(), weight_bytes / 2, 100 + c, 0.02f, stream_);
    }
    DeviceBuffer x(static_cast<size_t>(256) * k * 2, "bench x"), y(static_cast<size_t>(256) * n * 4, "bench y");
    fill_random_bf16(x.as<__nv_bfloat16>(), static_cast<size_t>(256) * k, 7, 1.0f, stream_);
    // With swiglu: the SwiGLU kernel's output after cuBLASLt, [rows, n / 2] bf16.
    DeviceBuffer activation(swiglu ? static_cast<size_t>(256) * n : 1, "bench activation");
    for (int rows : rows_list) {
      const std::string shape = std::to_string(rows) + "x" + std::to_string(k) + " * " + std::to_string(n) + "x" +
                                std::to_string(k) + " (" + name + ")";
      const double bytes = static_cast<double>(weight_bytes) + 2.0 * rows * (k + n);
      const auto params = [&](int i) {
        GemvParams p{x.as<__nv_bfloat16>(),
                     weights[static_cast<size_t>(i % copies)].as<__nv_bfloat16>(),
                     y.data(),
                     false,
                     rows,
                     n,
                     k};
        p.swiglu = swiglu;
        return p;
      };
      const std::string suffix = swiglu ? " + swiglu" : "";
      if (rows <= kGemvMaxRows) {
        const double t = time_per_call([&](int i) { launch_gemv(params(i), kernel_stream()); }, 20 * copies, stream_);
        record("gemv" + suffix, shape, t, bytes, true);
      }
      if (gemv_mma_supports(params(0))) {
        const auto time_mma = [&](GemvMmaShape launch) {
          return time_per_call([&](int i) { launch_gemv_mma(params(i), launch, kernel_stream()); }, 20 * copies,
                               stream_);
        };
        if (sweep_mma) {
          for (const GemvMmaShape launch : gemv_mma_shapes())
            record(
                "mma " + std::to_string(launch.warps) + "w " + std::to_string(launch.groups_in_flight) + "f" + suffix,
                shape, time_mma(launch), bytes, true);
        } else {
          record("gemv mma" + suffix, shape, time_mma(gemv_mma_default_shape(n)), bytes, true);
        }
      }
      const double t = time_per_call(
          [&](int i) {
            gemm_.matmul(x.as<__nv_bfloat16>(), weights[static_cast<size_t>(i % copies)].as<__nv_bfloat16>(), y.data(),
                         false, rows, n, k, stream_);
            if (swiglu)
              launch_swiglu({y.as<__nv_bfloat16>(), activation.as<__nv_bfloat16>(), rows, n / 2}, kernel_stream());
          },
          20 * copies, stream_);
      record("cublasLt" + suffix, shape, t, bytes, true);
    }
  }

  // Prefill GEMM rate at large M.
  void prefill_gemm(const char* name, int m, int n, int k) {
    DeviceBuffer w(static_cast<size_t>(n) * k * 2, "bench"), x(static_cast<size_t>(m) * k * 2, "bench"),
        y(static_cast<size_t>(m) * n * 2, "bench");
    fill_random_bf16(w.as<__nv_bfloat16>(), static_cast<size_t>(n) * k, 3, 0.02f, stream_);
    fill_random_bf16(x.as<__nv_bfloat16>(), static_cast<size_t>(m) * k, 4, 1.0f, stream_);
    const std::string shape = std::to_string(m) + "x" + std::to_string(k) + " * " + std::to_string(n) + "x" +
                              std::to_string(k) + " (" + name + ")";
    const auto time_gemm = [&] {
      return time_per_call(
          [&](int) { gemm_.matmul(x.as<__nv_bfloat16>(), w.as<__nv_bfloat16>(), y.data(), false, m, n, k, stream_); },
          10, stream_);
    };
    record("cublasLt", shape, time_gemm(), 2.0 * m * n * k, false);
    const CublasLtGemm::TuneResult tuned =
        gemm_.tune(x.as<__nv_bfloat16>(), w.as<__nv_bfloat16>(), y.data(), false, m, n, k, stream_);
    std::printf("  tuning: candidate %d of %d, %.1f -> %.1f us in the sweep\n", tuned.chosen, tuned.candidates,
                tuned.first_choice_seconds * 1e6, tuned.chosen_seconds * 1e6);
    record("cublasLt tuned", shape, time_gemm(), 2.0 * m * n * k, false);
  }

  // A paged KV pool for `sequences` sequences of `context` tokens; block tables scattered over the pool, or in pool
  // order (each sequence's K and V one contiguous run per KV head block).
  struct Pool {
    DeviceBuffer k, v, tables;
    int stride = 0;
    int num_blocks = 0;
  };
  Pool make_pool(int sequences, int context, bool scattered = true) {
    constexpr int kBlock = 16;
    Pool pool;
    pool.stride = (context + kBlock - 1) / kBlock;
    const int num_blocks = sequences * pool.stride;
    pool.num_blocks = num_blocks;
    const size_t elements = static_cast<size_t>(num_blocks) * kKvHeads * kBlock * kHeadDim;
    pool.k = DeviceBuffer(elements * 2, "bench K");
    pool.v = DeviceBuffer(elements * 2, "bench V");
    fill_random_bf16(pool.k.as<__nv_bfloat16>(), elements, 11, 1.0f, stream_);
    fill_random_bf16(pool.v.as<__nv_bfloat16>(), elements, 12, 1.0f, stream_);
    // Scatter: block i of the pool order goes to (i * odd) mod num_blocks, a permutation when num_blocks is coprime.
    std::vector<int32_t> tables(static_cast<size_t>(num_blocks));
    int64_t multiplier = scattered ? 7919 : 1;
    while (std::gcd(multiplier, static_cast<int64_t>(num_blocks)) != 1) multiplier += 2;
    for (int i = 0; i < num_blocks; ++i)
      tables[static_cast<size_t>(i)] = static_cast<int32_t>(i * multiplier % num_blocks);
    pool.tables = device_copy(tables);
    return pool;
  }

  // Buffers and params of decode attention for `sequences` one-token queries over `pool` (table row s for sequence s,
  // every context `context` tokens).
  struct DecodeSetup {
    DeviceBuffer rows, lens, split_out, split_lse, counters;
    DecodeAttentionParams p;
  };
  DecodeSetup make_decode_setup(const Pool& pool, int sequences, int context, const DeviceBuffer& q, DeviceBuffer& out,
                                bool merge_in_kernel = true) {
    DecodeSetup d;
    std::vector<int32_t> rows(static_cast<size_t>(sequences)), lens(static_cast<size_t>(sequences), context);
    for (int s = 0; s < sequences; ++s) rows[static_cast<size_t>(s)] = s;
    d.rows = device_copy(rows);
    d.lens = device_copy(lens);
    const size_t split_rows = static_cast<size_t>(decode_attention_max_split_rows(sequences, device_.num_sms));
    d.split_out = DeviceBuffer(split_rows * kHeads * kHeadDim * 4, "bench");
    d.split_lse = DeviceBuffer(split_rows * kHeads * 4, "bench");
    d.counters = DeviceBuffer(static_cast<size_t>(sequences) * kKvHeads * 4, "bench");
    CUDA_CHECK(cudaMemset(d.counters.data(), 0, static_cast<size_t>(sequences) * kKvHeads * 4));
    DecodeAttentionParams& p = d.p;
    p.q = q.as<__nv_bfloat16>();
    p.k_cache = pool.k.as<__nv_bfloat16>();
    p.v_cache = pool.v.as<__nv_bfloat16>();
    p.block_tables = pool.tables.as<int32_t>();
    p.table_rows = d.rows.as<int32_t>();
    p.q_rows = d.rows.as<int32_t>();
    p.context_lens = d.lens.as<int32_t>();
    p.out = out.as<__nv_bfloat16>();
    p.split_out = d.split_out.as<float>();
    p.split_lse = d.split_lse.as<float>();
    p.split_counters = merge_in_kernel ? d.counters.as<uint32_t>() : nullptr;
    p.block_table_stride = pool.stride;
    p.num_decode = sequences;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.block_size = 16;
    p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    p.pool_blocks = pool.num_blocks;
    plan_decode_attention_splits(p, context, device_);
    return d;
  }

  // merge_in_kernel: splits merged by the last block of each (sequence, KV head) through arrival counters, as the
  // backend runs it; otherwise by the second kernel. fp8_split_tokens: tokens per split (multiples of 64) to time the
  // fp8 kernel with besides the planned one, to check the planner.
  void decode_attention(int sequences, int context, bool merge_in_kernel = true, bool scattered = true,
                        const std::vector<int>& fp8_split_tokens = {}) {
    Pool pool = make_pool(sequences, context, scattered);
    DeviceBuffer q(static_cast<size_t>(sequences) * kHeads * kHeadDim * 2, "bench q"),
        out(static_cast<size_t>(sequences) * kHeads * kHeadDim * 2, "bench out");
    fill_random_bf16(q.as<__nv_bfloat16>(), static_cast<size_t>(sequences) * kHeads * kHeadDim, 5, 1.0f, stream_);
    const DecodeSetup setup = make_decode_setup(pool, sequences, context, q, out, merge_in_kernel);
    const DecodeAttentionParams& p = setup.p;
    const auto shape_of = [&](const DecodeAttentionParams& plan) {
      return std::to_string(sequences) + " seqs x " + std::to_string(context) + " ctx" +
             (scattered ? "" : ", blocks in order") + " (" + std::to_string(plan.num_splits) +
             (plan.num_splits == 1 ? " split)"
              : merge_in_kernel    ? " splits, merged in kernel)"
                                   : " splits, merge kernel)");
    };
    const auto time_kernel = [&](const DecodeAttentionParams& params, DecodeAttentionKernel kernel) {
      return time_per_call([&](int) { launch_decode_attention(params, kernel_stream(), kernel); }, 20, stream_);
    };
    const double bytes = 2.0 * sequences * context * kKvHeads * kHeadDim * 2;
    record("decode attention cp.async", shape_of(p), time_kernel(p, DecodeAttentionKernel::kCpAsync), bytes, true);
    record("decode attention registers", shape_of(p), time_kernel(p, DecodeAttentionKernel::kRegisters), bytes, true);
    if (decode_attention_bulk_copy_available(p, device_)) {
      record("decode attention bulk copy", shape_of(p), time_kernel(p, DecodeAttentionKernel::kBulkCopy), bytes, true);
      record("decode attention bulk copy 2-stage", shape_of(p),
             time_kernel(p, DecodeAttentionKernel::kBulkCopyTwoStage), bytes, true);
    }

    // The same pool as an fp8 cache: random bytes (NaN codes included: the speed does not depend on the values) and
    // scales, in the bf16 pool's buffers (half their size is used), planned for the fp8 kernel's resident blocks.
    // Bytes: E4M3 data plus one fp32 scale per vector.
    const size_t vectors = static_cast<size_t>(pool.num_blocks) * kKvHeads * 16;
    DeviceBuffer k_scales(vectors * 4, "bench"), v_scales(vectors * 4, "bench");
    fill_random_f32(k_scales.as<float>(), vectors, 13, 0.01f, stream_);
    fill_random_f32(v_scales.as<float>(), vectors, 14, 0.01f, stream_);
    DecodeAttentionParams fp8 = p;
    fp8.k_fp8 = pool.k.as<uint8_t>();
    fp8.v_fp8 = pool.v.as<uint8_t>();
    fp8.k_scales = k_scales.as<float>();
    fp8.v_scales = v_scales.as<float>();
    plan_decode_attention_splits(fp8, context, device_);
    const double fp8_bytes = 2.0 * sequences * context * kKvHeads * (kHeadDim + 4);
    record("decode attention fp8", shape_of(fp8), time_kernel(fp8, DecodeAttentionKernel::kCpAsync), fp8_bytes, true);
    record("decode attention fp8 registers", shape_of(fp8), time_kernel(fp8, DecodeAttentionKernel::kRegisters),
           fp8_bytes, true);
    if (decode_attention_bulk_copy_available(fp8, device_))
      record("decode attention fp8 bulk copy", shape_of(fp8), time_kernel(fp8, DecodeAttentionKernel::kBulkCopy),
             fp8_bytes, true);
    const int max_splits = decode_attention_max_split_rows(sequences, device_.num_sms) / sequences;
    for (int tokens : fp8_split_tokens) {
      DecodeAttentionParams forced = fp8;
      forced.tokens_per_split = tokens;
      forced.num_splits = (context + tokens - 1) / tokens;
      if (tokens <= 0 || tokens % 64 != 0 || forced.num_splits > max_splits) continue;
      record("decode attention fp8 (forced)", shape_of(forced), time_kernel(forced, DecodeAttentionKernel::kAuto),
             fp8_bytes, true);
    }
  }

  // One causal prompt of `length` new tokens over `pool` (its first table row); meta holds {table row, q start, q len,
  // cached} = {0, 0, length, 0}.
  static PrefillAttentionParams one_prompt_attention(const Pool& pool, const DeviceBuffer& q, DeviceBuffer& out,
                                                     const DeviceBuffer& meta, int length) {
    PrefillAttentionParams p;
    p.q = q.as<__nv_bfloat16>();
    p.k_cache = pool.k.as<__nv_bfloat16>();
    p.v_cache = pool.v.as<__nv_bfloat16>();
    p.block_tables = pool.tables.as<int32_t>();
    p.table_rows = meta.as<int32_t>();
    p.q_starts = meta.as<int32_t>() + 1;
    p.q_lens = meta.as<int32_t>() + 2;
    p.cached_lens = meta.as<int32_t>() + 3;
    p.out = out.as<__nv_bfloat16>();
    p.block_table_stride = pool.stride;
    p.num_prefill = 1;
    p.max_q_len = length;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.block_size = 16;
    p.pool_blocks = pool.num_blocks;
    p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    return p;
  }

  // Both prefill kernels on the same data (the wgmma one where the device has it).
  void prefill_attention(int length) {
    Pool pool = make_pool(1, length);
    DeviceBuffer q(static_cast<size_t>(length) * kHeads * kHeadDim * 2, "bench q"),
        out(static_cast<size_t>(length) * kHeads * kHeadDim * 2, "bench out");
    fill_random_bf16(q.as<__nv_bfloat16>(), static_cast<size_t>(length) * kHeads * kHeadDim, 6, 1.0f, stream_);
    const std::vector<int32_t> meta = {0, 0, length, 0};  // table row, q start, q len, cached
    const DeviceBuffer dmeta = device_copy(meta);
    const PrefillAttentionParams p = one_prompt_attention(pool, q, out, dmeta, length);
    // Causal: query i attends to i + 1 keys; QK^T and PV are 2 * head_dim FLOPs per (query, key) each.
    const double flops = 4.0 * kHeadDim * kHeads * (static_cast<double>(length) * (length + 1) / 2);
    const std::string shape = "1 seq x " + std::to_string(length) + " causal";
    record("prefill attention mma.sync", shape,
           time_per_call([&](int) { launch_prefill_attention_mma_sync(p, kernel_stream()); }, 5, stream_), flops,
           false);
    if (prefill_attention_wgmma_available(device_))
      record("prefill attention wgmma", shape,
             time_per_call([&](int) { launch_prefill_attention_wgmma(p, kernel_stream()); }, 5, stream_), flops, false);
  }

  // One step's kernels at `tokens` rows (Qwen3-4B shapes), each timed alone, then the layer's chain in order as one
  // graph: the per-kernel breakdown of a step (x 36 layers + embedding; + lm_head for decode). decode_context 0: one
  // prompt of `tokens` tokens (prefill); else `tokens` sequences of decode_context tokens each, one new token each,
  // with the linears through cuBLASLt.
  void layer_breakdown(int tokens, int decode_context) {
    const bool decode = decode_context > 0;
    constexpr int kHidden = 2560, kIntermediate = 9728, kQWidth = kHeads * kHeadDim;
    constexpr int kQkvWidth = (kHeads + 2 * kKvHeads) * kHeadDim, kLayers = 36, kTableRows = 16384;
    const size_t m = static_cast<size_t>(tokens);
    const auto random_bf16_buffer = [&](size_t elements, uint64_t seed, float scale) {
      DeviceBuffer buffer(elements * 2, "bench");
      fill_random_bf16(buffer.as<__nv_bfloat16>(), elements, seed, scale, stream_);
      return buffer;
    };
    DeviceBuffer table = random_bf16_buffer(size_t{kTableRows} * kHidden, 21, 0.05f);
    DeviceBuffer norm_weight = random_bf16_buffer(kHidden, 22, 1.0f),
                 head_norm = random_bf16_buffer(kHeadDim, 23, 1.0f);
    DeviceBuffer w_qkv = random_bf16_buffer(size_t{kQkvWidth} * kHidden, 24, 0.02f),
                 w_o = random_bf16_buffer(size_t{kHidden} * kQWidth, 25, 0.02f),
                 w_gate_up = random_bf16_buffer(size_t{2 * kIntermediate} * kHidden, 26, 0.02f),
                 w_down = random_bf16_buffer(size_t{kHidden} * kIntermediate, 27, 0.02f);
    DeviceBuffer delta = random_bf16_buffer(m * kHidden, 28, 1.0f), normed = random_bf16_buffer(m * kHidden, 29, 1.0f),
                 qkv = random_bf16_buffer(m * kQkvWidth, 30, 1.0f), q = random_bf16_buffer(m * kQWidth, 31, 1.0f),
                 attention = random_bf16_buffer(m * kQWidth, 32, 1.0f),
                 gate_up = random_bf16_buffer(m * 2 * kIntermediate, 33, 1.0f),
                 activation = random_bf16_buffer(m * kIntermediate, 34, 1.0f);
    DeviceBuffer residual(m * kHidden * 4, "bench"), inv_freq(kHeadDim / 2 * 4, "bench");
    fill_random_f32(residual.as<float>(), m * kHidden, 35, 1.0f, stream_);
    fill_random_f32(inv_freq.as<float>(), kHeadDim / 2, 36, 0.5f, stream_);
    Pool pool = decode ? make_pool(tokens, decode_context) : make_pool(1, tokens, false);
    std::vector<int32_t> ids(m), positions(m), meta = {0, 0, tokens, 0};  // table row, q start, q len, cached
    std::vector<int64_t> slots(m);
    for (int t = 0; t < tokens; ++t) {
      ids[static_cast<size_t>(t)] = (t * 7919) % kTableRows;
      positions[static_cast<size_t>(t)] = decode ? decode_context - 1 : t;
      slots[static_cast<size_t>(t)] = decode ? static_cast<int64_t>(t) * 16 : t;  // decode: the first slot of block t
    }
    const DeviceBuffer d_ids = device_copy(ids), d_positions = device_copy(positions), d_slots = device_copy(slots),
                       d_meta = device_copy(meta);

    FusedAddRmsNormParams norm;
    norm.residual = residual.as<float>();
    norm.delta = delta.as<__nv_bfloat16>();
    norm.weight = norm_weight.as<__nv_bfloat16>();
    norm.out = normed.as<__nv_bfloat16>();
    norm.num_rows = tokens;
    norm.hidden = kHidden;
    QkNormRopeCacheWriteParams rope;
    rope.qkv = qkv.as<__nv_bfloat16>();
    rope.positions = d_positions.as<int32_t>();
    rope.slots = d_slots.as<int64_t>();
    rope.q_norm = rope.k_norm = head_norm.as<__nv_bfloat16>();
    rope.inv_freq = inv_freq.as<float>();
    rope.q_out = q.as<__nv_bfloat16>();
    rope.k_cache = pool.k.as<__nv_bfloat16>();
    rope.v_cache = pool.v.as<__nv_bfloat16>();
    rope.num_tokens = tokens;
    rope.num_heads = kHeads;
    rope.num_kv_heads = kKvHeads;
    rope.head_dim = kHeadDim;
    rope.block_size = 16;
    const PrefillAttentionParams attn = one_prompt_attention(pool, q, attention, d_meta, tokens);
    const DecodeSetup decode_setup =
        make_decode_setup(pool, decode ? tokens : 1, std::max(decode_context, 1), q, attention);
    // A decode-only step's attention does the QK-norm/RoPE/cache write itself, as the backend runs it.
    DecodeAttentionParams fused_decode = decode_setup.p;
    fused_decode.rope = rope;
    const auto gemm = [&](const DeviceBuffer& x, const DeviceBuffer& w, DeviceBuffer& y, int n, int k) {
      gemm_.matmul(x.as<__nv_bfloat16>(), w.as<__nv_bfloat16>(), y.data(), false, tokens, n, k, stream_);
    };

    struct Op {
      const char* name;
      std::function<void()> launch;
      double amount;  // bytes moved or FLOPs
      bool bandwidth;
    };
    const double rows = static_cast<double>(tokens);
    const double attention_amount = decode ? 2.0 * rows * decode_context * kKvHeads * kHeadDim * 2
                                           : 4.0 * kHeadDim * kHeads * (rows * (rows + 1) / 2);
    const auto weight_bytes = [](int n, int k) { return 2.0 * n * k; };
    // Linears count FLOPs in prefill and weight bytes in decode.
    const auto linear_amount = [&](int n, int k) { return decode ? weight_bytes(n, k) : 2.0 * rows * n * k; };
    std::vector<Op> layer = {
        {"add + rmsnorm", [&] { launch_fused_add_rmsnorm(norm, kernel_stream()); }, rows * kHidden * 12.0, true},
        {"qkv", [&] { gemm(normed, w_qkv, qkv, kQkvWidth, kHidden); }, linear_amount(kQkvWidth, kHidden), decode},
        {"qk norm+rope+kv", [&] { launch_qk_norm_rope_cache_write(rope, kernel_stream()); }, rows * kQkvWidth * 4.0,
         true},
        {decode ? "attention + qk norm+rope+kv" : "attention",
         [&] {
           if (decode)
             launch_decode_attention(fused_decode, kernel_stream());
           else
             launch_prefill_attention(attn, kernel_stream());
         },
         attention_amount, decode},
        {"o_proj", [&] { gemm(attention, w_o, delta, kHidden, kQWidth); }, linear_amount(kHidden, kQWidth), decode},
        {"add + rmsnorm", [&] { launch_fused_add_rmsnorm(norm, kernel_stream()); }, rows * kHidden * 12.0, true},
        {"gate_up", [&] { gemm(normed, w_gate_up, gate_up, 2 * kIntermediate, kHidden); },
         linear_amount(2 * kIntermediate, kHidden), decode},
        {"swiglu",
         [&] {
           launch_swiglu({gate_up.as<__nv_bfloat16>(), activation.as<__nv_bfloat16>(), tokens, kIntermediate},
                         kernel_stream());
         },
         rows * kIntermediate * 6.0, true},
        {"down", [&] { gemm(activation, w_down, delta, kHidden, kIntermediate); },
         linear_amount(kHidden, kIntermediate), decode}};
    if (decode) layer.erase(layer.begin() + 2);  // the QK-norm/RoPE kernel: fused into the attention
    const std::string shape =
        std::to_string(tokens) + (decode ? " seqs x " + std::to_string(decode_context) : "") + " tokens, 1 layer";
    const double t_embedding = time_per_call(
        [&](int) {
          launch_embedding({d_ids.as<int32_t>(), table.as<__nv_bfloat16>(), residual.as<float>(), tokens, kHidden},
                           kernel_stream());
        },
        5, stream_);
    record("step: embedding", std::to_string(tokens) + " tokens", t_embedding, rows * kHidden * 6.0, true);
    double sum = 0;
    for (const Op& op : layer) {
      const double t = time_per_call([&](int) { op.launch(); }, decode ? 20 : 5, stream_);
      record(std::string("step: ") + op.name, shape, t, op.amount, op.bandwidth);
      sum += t;
    }
    const double t_chain = time_per_call(
        [&](int) {
          for (const Op& op : layer) op.launch();
        },
        decode ? 10 : 3, stream_);
    std::printf(
        "%s step %d %s: kernels of one layer %.3f ms alone, %.3f ms as a chain; x %d layers + embedding = %.2f ms "
        "(chain)\n",
        decode ? "decode" : "prefill", tokens, decode ? "sequences" : "tokens", sum * 1e3, t_chain * 1e3, kLayers,
        (kLayers * t_chain + t_embedding) * 1e3);
  }

  // Dequantising gather of one layer's fp8 K/V for a prefill of `context` tokens (block 16) into a bf16 scratch.
  // Bytes: fp8 data and scales read, bf16 written. Four disjoint scattered block lists rotate over a pool of 4x the
  // context so that the reads do not come from L2.
  void kv_gather(int context) {
    constexpr int kBlock = 16, kCopies = 4;
    const int blocks = (context + kBlock - 1) / kBlock, pool_blocks = kCopies * blocks;
    const size_t block_elements = static_cast<size_t>(kKvHeads) * kBlock * kHeadDim;
    const size_t pool_elements = static_cast<size_t>(pool_blocks) * block_elements;
    const size_t scale_count = static_cast<size_t>(pool_blocks) * kKvHeads * kBlock;
    DeviceBuffer k(pool_elements, "bench fp8 K"), v(pool_elements, "bench fp8 V"), k_scales(scale_count * 4, "bench"),
        v_scales(scale_count * 4, "bench"), k_out(static_cast<size_t>(blocks) * block_elements * 2, "bench"),
        v_out(static_cast<size_t>(blocks) * block_elements * 2, "bench");
    // Random bytes (NaN codes included: the conversion's speed does not depend on the values).
    fill_random_bf16(k.as<__nv_bfloat16>(), pool_elements / 2, 21, 1.0f, stream_);
    fill_random_bf16(v.as<__nv_bfloat16>(), pool_elements / 2, 22, 1.0f, stream_);
    fill_random_f32(k_scales.as<float>(), scale_count, 23, 0.01f, stream_);
    fill_random_f32(v_scales.as<float>(), scale_count, 24, 0.01f, stream_);
    std::vector<int32_t> src(static_cast<size_t>(pool_blocks)), valid(static_cast<size_t>(blocks), kBlock);
    int64_t multiplier = 7919;
    while (std::gcd(multiplier, static_cast<int64_t>(pool_blocks)) != 1) multiplier += 2;
    for (int i = 0; i < pool_blocks; ++i)
      src[static_cast<size_t>(i)] = static_cast<int32_t>(i * multiplier % pool_blocks);
    valid.back() = context - (blocks - 1) * kBlock;
    const DeviceBuffer d_src = device_copy(src), d_valid = device_copy(valid);
    KvDequantGatherParams params;
    params.k_cache = k.as<uint8_t>();
    params.v_cache = v.as<uint8_t>();
    params.k_scales = k_scales.as<float>();
    params.v_scales = v_scales.as<float>();
    params.valid_tokens = d_valid.as<int32_t>();
    params.k_out = k_out.as<__nv_bfloat16>();
    params.v_out = v_out.as<__nv_bfloat16>();
    params.num_blocks = blocks;
    params.num_kv_heads = kKvHeads;
    params.block_size = kBlock;
    params.head_dim = kHeadDim;
    const double t = time_per_call(
        [&](int i) {
          params.src_blocks = d_src.as<int32_t>() + static_cast<size_t>(i % kCopies) * blocks;
          launch_kv_dequant_gather(params, kernel_stream());
        },
        20 * kCopies, stream_);
    const double bytes = 2.0 * blocks * (block_elements * 3.0 + kKvHeads * kBlock * 4.0);
    record("kv dequant gather", std::to_string(context) + " tokens, 8 kv heads x 128, block 16", t, bytes, true);
  }

  // The small per-layer kernels of a batch-1 decode step, timed as graph replays (what a decode graph pays).
  void decode_small_ops() {
    constexpr int kHidden = 2560, kIntermediate = 9728, kQkvWidth = (kHeads + 2 * kKvHeads) * kHeadDim;
    DeviceBuffer residual(kHidden * 4, "bench"), delta(kHidden * 2, "bench"), weight(kIntermediate * 2, "bench"),
        normed(kHidden * 2, "bench"), gate_up(2 * kIntermediate * 2, "bench"), act(kIntermediate * 2, "bench"),
        qkv(kQkvWidth * 2, "bench"), q(kHeads * kHeadDim * 2, "bench"),
        cache(2 * 16 * kKvHeads * kHeadDim * 2, "bench"), meta(64, "bench"), inv_freq(kHeadDim / 2 * 4, "bench");
    fill_random_bf16(delta.as<__nv_bfloat16>(), kHidden, 1, 1.0f, stream_);
    fill_random_bf16(weight.as<__nv_bfloat16>(), kIntermediate, 2, 1.0f, stream_);
    fill_random_bf16(gate_up.as<__nv_bfloat16>(), 2 * kIntermediate, 3, 1.0f, stream_);
    fill_random_bf16(qkv.as<__nv_bfloat16>(), kQkvWidth, 4, 1.0f, stream_);
    fill_random_f32(residual.as<float>(), kHidden, 5, 1.0f, stream_);
    fill_random_f32(inv_freq.as<float>(), kHeadDim / 2, 6, 0.5f, stream_);
    CUDA_CHECK(cudaMemsetAsync(meta.data(), 0, 64, stream_));
    FusedAddRmsNormParams norm;
    norm.residual = residual.as<float>();
    norm.delta = delta.as<__nv_bfloat16>();
    norm.weight = weight.as<__nv_bfloat16>();
    norm.out = normed.as<__nv_bfloat16>();
    norm.num_rows = 1;
    norm.hidden = kHidden;
    const double t_norm = time_per_call([&](int) { launch_fused_add_rmsnorm(norm, kernel_stream()); }, 200, stream_);
    record("add + rmsnorm", "1 x 2560", t_norm, kHidden * 12.0, true);
    const double t_swiglu = time_per_call(
        [&](int) {
          launch_swiglu({gate_up.as<__nv_bfloat16>(), act.as<__nv_bfloat16>(), 1, kIntermediate}, kernel_stream());
        },
        200, stream_);
    record("swiglu", "1 x 9728", t_swiglu, kIntermediate * 6.0, true);
    QkNormRopeCacheWriteParams rope;
    rope.qkv = qkv.as<__nv_bfloat16>();
    rope.positions = meta.as<int32_t>();
    rope.slots = reinterpret_cast<const int64_t*>(meta.as<int32_t>() + 4);
    rope.q_norm = rope.k_norm = weight.as<__nv_bfloat16>();
    rope.inv_freq = inv_freq.as<float>();
    rope.q_out = q.as<__nv_bfloat16>();
    rope.k_cache = cache.as<__nv_bfloat16>();
    rope.v_cache = cache.as<__nv_bfloat16>() + 16 * kKvHeads * kHeadDim;
    rope.num_tokens = 1;
    rope.num_heads = kHeads;
    rope.num_kv_heads = kKvHeads;
    rope.head_dim = kHeadDim;
    rope.block_size = 16;
    const double t_rope =
        time_per_call([&](int) { launch_qk_norm_rope_cache_write(rope, kernel_stream()); }, 200, stream_);
    record("qk norm+rope+kv", "1 token", t_rope, kQkvWidth * 4.0, true);
  }

  // GPU sampling of `rows` rows of 151936 logits with the given parameters (bytes: one read of the logits), uniform in
  // +-8, with `spikes`: every 997th logit 10 higher. Each row gets `history` distinct penalised tokens (spread over the
  // vocabulary, every third one also in the output).
  void sampling(const char* name, int rows, const DeviceSamplingParams& params, int history = 0, bool spikes = false) {
    constexpr int kVocab = 151936;
    const size_t elements = static_cast<size_t>(rows) * kVocab;
    std::vector<PenaltyEntry> entries;
    std::vector<DeviceSamplingParams> all(static_cast<size_t>(rows), params);
    for (int r = 0; r < rows; ++r) {
      all[r].penalty_begin = static_cast<int32_t>(entries.size());
      for (int i = 0; i < history; ++i) entries.push_back({(r * 131 + i * 7919) % kVocab, i % 3 == 0 ? 1 + i % 4 : 0});
      all[r].penalty_end = static_cast<int32_t>(entries.size());
      all[r].step = static_cast<uint64_t>(r);
    }
    if (entries.empty()) entries.push_back({});
    DeviceBuffer logits(elements * 4, "bench"), work(elements * 4, "bench"), probs(elements * 4, "bench"),
        results(rows * sizeof(SampledToken), "bench"),
        stats(static_cast<size_t>(rows * sampling_chunks(kVocab)) * sizeof(LogitsChunkStats), "bench");
    fill_random_f32(logits.as<float>(), elements, 7, 8.0f, stream_);
    if (spikes) add_spikes_f32(logits.as<float>(), elements, 997, 10.0f, stream_);
    const DeviceBuffer dparams = device_copy(all), dentries = device_copy(entries);
    SamplingKernelParams p{logits.as<float>(),
                           work.as<float>(),
                           probs.as<float>(),
                           dparams.as<DeviceSamplingParams>(),
                           dentries.as<PenaltyEntry>(),
                           results.as<SampledToken>(),
                           rows,
                           kVocab,
                           stats.as<LogitsChunkStats>()};
    const double t = time_per_call([&](int) { launch_sampling(p, kernel_stream()); }, 20, stream_);
    record("sampling", std::to_string(rows) + " x 151936 (" + name + ")", t, static_cast<double>(elements) * 4, true);
  }

  void summary() const {
    std::printf("\n| kernel | shape | time (us) | achieved | %% of ceiling |\n|---|---|---|---|---|\n");
    for (const Row& r : rows_) print_table_row(r);
  }

 private:
  static void print(const Row& r) {
    std::printf("%-18s %-52s %10.2f us  %s\n", r.kernel.c_str(), r.shape.c_str(), r.seconds * 1e6,
                rate_text(r).c_str());
    std::fflush(stdout);
  }
  static void print_table_row(const Row& r) {
    std::printf("| %s | %s | %.2f | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.seconds * 1e6,
                rate_text(r, " | ").c_str());
  }
  static std::string rate_text(const Row& r, const char* separator = "  ") {
    char text[96];
    if (r.bandwidth)
      std::snprintf(text, sizeof(text), "%.3f TB/s%s%.1f %%", r.rate / 1e12, separator, 100 * r.rate / kCopyCeiling);
    else
      std::snprintf(text, sizeof(text), "%.1f TFLOP/s%s%.1f %%", r.rate / 1e12, separator,
                    100 * r.rate / kMatmulCeiling);
    return text;
  }
  KernelStream kernel_stream() const { return {stream_, device_}; }

  DeviceCapabilities device_ = query_device_capabilities();
  cudaStream_t stream_ = nullptr;
  CublasLtGemm gemm_;
  std::vector<Row> rows_;
};

}  // namespace
}  // namespace qinfer::cuda::bench

// Optional argument: run only one group of cases (copy, linear, gemm, decode_attention, prefill_attention,
// small_ops, kv_gather, sampling); the copy ceiling always runs first. `decode_attention SEQUENCES CONTEXT
// [TOKENS_PER_SPLIT...]` runs that one case (for profilers), the fp8 kernel also with each split size given, as does
// `prefill_attention LENGTH`; `prefill_step [TOKENS]` and `decode_step [SEQUENCES [CONTEXT]]` (not in the default run)
// break one step down by kernel, the latter after timing every decode linear at 8, 64 and 128 rows (GEMV where it
// applies, cuBLASLt).
int main(int argc, char** argv) {
  using qinfer::cuda::DeviceSamplingParams;
  using qinfer::cuda::bench::Bench;
  const std::string only = argc > 1 ? argv[1] : "";
  const auto wants = [&](const char* group) { return only.empty() || only == group; };
  Bench bench;
  bench.copy_ceiling();
  if (wants("linear")) {
    const std::vector<int> decode_rows = {1, 2, 4, 8, 16};
    bench.linear("qkv", 6144, 2560, decode_rows);
    bench.linear("o_proj", 2560, 4096, decode_rows);
    bench.linear("gate_up", 2 * 9728, 2560, decode_rows);
    bench.linear("down", 2560, 9728, decode_rows);
    bench.linear("lm_head", 151936, 2560, {1, 16});
    bench.linear("gate_up", 2 * 9728, 2560, {64, 256});
  }
  if (only == "gemv_mma") {  // every launch shape of the tensor-core GEMV against GEMV and cuBLASLt
    const std::vector<int> decode_rows = {1, 2, 3, 4, 8, 16};
    bench.linear("qkv", 6144, 2560, decode_rows, true);
    bench.linear("o_proj", 2560, 4096, decode_rows, true);
    bench.linear("gate_up", 2 * 9728, 2560, decode_rows, true, true);
    bench.linear("down", 2560, 9728, decode_rows, true);
    bench.linear("lm_head", 151936, 2560, {1, 2, 16}, false);
  }
  if (wants("gemm")) {
    for (int m : {8192, 1024}) {
      bench.prefill_gemm("qkv", m, 6144, 2560);
      bench.prefill_gemm("o_proj", m, 2560, 4096);
      bench.prefill_gemm("gate_up", m, 2 * 9728, 2560);
      bench.prefill_gemm("down", m, 2560, 9728);
    }
  }
  if (only == "decode_attention" && argc >= 4) {
    std::vector<int> split_tokens;
    for (int i = 4; i < argc; ++i) split_tokens.push_back(std::atoi(argv[i]));
    bench.decode_attention(std::atoi(argv[2]), std::atoi(argv[3]), true, true, split_tokens);
  } else if (wants("decode_attention")) {
    bench.decode_attention(1, 1024);
    bench.decode_attention(1, 8192);
    bench.decode_attention(1, 8192, false);
    bench.decode_attention(8, 4096);
    bench.decode_attention(64, 640);
    bench.decode_attention(64, 1024);
    bench.decode_attention(64, 8192);
    bench.decode_attention(64, 8192, true, false);
    bench.decode_attention(16, 32768);
    bench.decode_attention(256, 1536);
  }
  if (only == "prefill_attention" && argc == 3) {
    bench.prefill_attention(std::atoi(argv[2]));
  } else if (wants("prefill_attention")) {
    bench.prefill_attention(1024);
    bench.prefill_attention(8192);
    bench.prefill_attention(32768);
  }
  if (wants("small_ops")) bench.decode_small_ops();
  if (wants("kv_gather")) {
    bench.kv_gather(8192);
    bench.kv_gather(32768);
  }
  if (only == "prefill_step") bench.layer_breakdown(argc > 2 ? std::atoi(argv[2]) : 8192, 0);
  if (only == "decode_step") {
    const int sequences = argc > 2 ? std::atoi(argv[2]) : 64, context = argc > 3 ? std::atoi(argv[3]) : 640;
    const std::vector<int> batch_rows = {8, 64, 128};
    bench.linear("qkv", 6144, 2560, batch_rows);
    bench.linear("o_proj", 2560, 4096, batch_rows);
    bench.linear("gate_up", 2 * 9728, 2560, batch_rows);
    bench.linear("down", 2560, 9728, batch_rows);
    bench.linear("lm_head", 151936, 2560, batch_rows);
    bench.layer_breakdown(sequences, context);
  }
  if (wants("sampling")) {
    const auto params = [](float temperature, int top_k, float top_p) {
      DeviceSamplingParams p;
      p.temperature = temperature;
      p.top_k = top_k;
      p.top_p = top_p;
      return p;
    };
    const DeviceSamplingParams greedy = params(0.0f, 0, 1.0f), model_card = params(0.7f, 20, 0.8f);
    DeviceSamplingParams presence = model_card, repetition = model_card, logprobs = greedy;
    presence.presence_penalty = 1.5f;  // the model card's advice against endless repetition
    repetition.repetition_penalty = 1.05f;
    logprobs.num_top_logprobs = 5;
    for (int rows : {1, 64}) {
      bench.sampling("greedy", rows, greedy);
      bench.sampling("T 0.7, top-k 20, top-p 0.8", rows, model_card);
      bench.sampling("T 1, top-p 0.9", rows, params(1.0f, 0, 0.9f));
      bench.sampling("T 1, top-p 0.9, spiked logits", rows, params(1.0f, 0, 0.9f), 0, true);
      bench.sampling("T 0.7, top-k 20, top-p 0.8, spiked logits", rows, model_card, 0, true);
      bench.sampling("model card + presence 1.5, 512 history", rows, presence, 512);
      bench.sampling("model card + repetition 1.05, 4096 history", rows, repetition, 4096);
      bench.sampling("greedy, 5 top logprobs", rows, logprobs);
    }
  }
  bench.summary();
  return 0;
}
