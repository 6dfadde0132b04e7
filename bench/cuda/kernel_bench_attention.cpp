// Kernel bench: paged decode and prefill attention over a random paged pool, the fp8 KV cache's dequantising gather.
#include "kernel_bench.h"

namespace qinfer::cuda::bench {

Bench::Pool Bench::make_pool(int sequences, int context, bool scattered) {
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

Bench::DecodeSetup Bench::make_decode_setup(const Pool& pool, int sequences, int context, const DeviceBuffer& q,
                                            DeviceBuffer& out, bool merge_in_kernel) {
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
  p.merge_in_kernel = merge_in_kernel;
  p.split_counters = merge_in_kernel ? d.counters.as<uint32_t>() : nullptr;
  p.block_table_stride = pool.stride;
  p.num_decode = sequences;
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.block_size = 16;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  p.pool_blocks = pool.num_blocks;
  d.plan = plan_decode_attention(p, context, device_);
  return d;
}

void Bench::decode_attention(int sequences, int context, bool merge_in_kernel, bool scattered,
                             const std::vector<int>& fp8_split_tokens) {
  Pool pool = make_pool(sequences, context, scattered);
  DeviceBuffer q(static_cast<size_t>(sequences) * kHeads * kHeadDim * 2, "bench q"),
      out(static_cast<size_t>(sequences) * kHeads * kHeadDim * 2, "bench out");
  fill_random_bf16(q.as<__nv_bfloat16>(), static_cast<size_t>(sequences) * kHeads * kHeadDim, 5, 1.0f, stream_);
  const DecodeSetup setup = make_decode_setup(pool, sequences, context, q, out, merge_in_kernel);
  const DecodeAttentionParams& p = setup.p;
  const auto shape_of = [&](const DecodeAttentionPlan& plan) {
    return std::to_string(sequences) + " seqs x " + std::to_string(context) + " ctx" +
           (scattered ? "" : ", blocks in order") + " (" + std::to_string(plan.num_splits) +
           (plan.num_splits == 1 ? " split)"
            : merge_in_kernel    ? " splits, merged in kernel)"
                                 : " splits, merge kernel)");
  };
  const auto time_kernel = [&](const DecodeAttentionParams& params, DecodeAttentionPlan plan,
                               DecodeAttentionKernel kernel) {
    plan.kernel = kernel;
    return time_per_call([&](int) { launch_decode_attention(params, plan, kernel_stream()); }, 20, stream_);
  };
  const double bytes = 2.0 * sequences * context * kKvHeads * kHeadDim * 2;
  const DecodeAttentionPlan& plan = setup.plan;
  record("decode attention cp.async", shape_of(plan), time_kernel(p, plan, DecodeAttentionKernel::kCpAsync), bytes,
         true);
  record("decode attention registers", shape_of(plan), time_kernel(p, plan, DecodeAttentionKernel::kRegisters), bytes,
         true);
  if (decode_attention_bulk_copy_available(p, device_)) {
    record("decode attention bulk copy", shape_of(plan), time_kernel(p, plan, DecodeAttentionKernel::kBulkCopy), bytes,
           true);
    record("decode attention bulk copy 2-stage", shape_of(plan),
           time_kernel(p, plan, DecodeAttentionKernel::kBulkCopyTwoStage), bytes, true);
  }

  // The same pool as an fp8 cache: random bytes (NaN codes included: the speed does not depend on the values) and
  // scales, in the bf16 pool's buffers (half their size is used), planned for the fp8 kernel's resident blocks.
  // Bytes: E4M3 data plus one fp32 scale per vector.
  const size_t vectors = static_cast<size_t>(pool.num_blocks) * kKvHeads * 16;
  DeviceBuffer k_scales(vectors * 4, "bench"), v_scales(vectors * 4, "bench");
  fill_random_f32(k_scales.as<float>(), vectors, 13, 0.01f, stream_);
  fill_random_f32(v_scales.as<float>(), vectors, 14, 0.01f, stream_);
  DecodeAttentionParams fp8 = p;
  fp8.kv_dtype = KvCacheDtype::kFp8E4m3;
  fp8.k_fp8 = pool.k.as<uint8_t>();
  fp8.v_fp8 = pool.v.as<uint8_t>();
  fp8.k_scales = k_scales.as<float>();
  fp8.v_scales = v_scales.as<float>();
  const DecodeAttentionPlan fp8_plan = plan_decode_attention(fp8, context, device_);
  const double fp8_bytes = 2.0 * sequences * context * kKvHeads * (kHeadDim + 4);
  record("decode attention fp8", shape_of(fp8_plan), time_kernel(fp8, fp8_plan, DecodeAttentionKernel::kCpAsync),
         fp8_bytes, true);
  record("decode attention fp8 registers", shape_of(fp8_plan),
         time_kernel(fp8, fp8_plan, DecodeAttentionKernel::kRegisters), fp8_bytes, true);
  if (decode_attention_bulk_copy_available(fp8, device_))
    record("decode attention fp8 bulk copy", shape_of(fp8_plan),
           time_kernel(fp8, fp8_plan, DecodeAttentionKernel::kBulkCopy), fp8_bytes, true);
  const int max_splits = decode_attention_max_split_rows(sequences, device_.num_sms) / sequences;
  for (int tokens : fp8_split_tokens) {
    DecodeAttentionPlan forced = fp8_plan;
    forced.tokens_per_split = tokens;
    forced.num_splits = (context + tokens - 1) / tokens;
    if (tokens <= 0 || tokens % 64 != 0 || forced.num_splits > max_splits) continue;
    record("decode attention fp8 (forced)", shape_of(forced), time_kernel(fp8, forced, DecodeAttentionKernel::kAuto),
           fp8_bytes, true);
  }
}

PrefillAttentionParams Bench::one_prompt_attention(const Pool& pool, const DeviceBuffer& q, DeviceBuffer& out,
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

void Bench::prefill_attention(int length) {
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
         time_per_call([&](int) { launch_prefill_attention_mma_sync(p, kernel_stream()); }, 5, stream_), flops, false);
  if (prefill_attention_wgmma_available(device_))
    record("prefill attention wgmma", shape,
           time_per_call([&](int) { launch_prefill_attention_wgmma(p, kernel_stream()); }, 5, stream_), flops, false);
}

void Bench::kv_gather(int context) {
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

}  // namespace qinfer::cuda::bench
