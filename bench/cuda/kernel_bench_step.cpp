// Kernel bench: one step broken down by kernel, the small per-layer decode kernels, GPU sampling.
#include "kernel_bench.h"

namespace qinfer::cuda::bench {

void Bench::layer_breakdown(int tokens, int decode_context) {
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
  DeviceBuffer norm_weight = random_bf16_buffer(kHidden, 22, 1.0f), head_norm = random_bf16_buffer(kHeadDim, 23, 1.0f);
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
  fused_decode.fuse_rope = true;
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
           launch_decode_attention(fused_decode, decode_setup.plan, kernel_stream());
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
      {"down", [&] { gemm(activation, w_down, delta, kHidden, kIntermediate); }, linear_amount(kHidden, kIntermediate),
       decode}};
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

void Bench::decode_small_ops() {
  constexpr int kHidden = 2560, kIntermediate = 9728, kQkvWidth = (kHeads + 2 * kKvHeads) * kHeadDim;
  DeviceBuffer residual(kHidden * 4, "bench"), delta(kHidden * 2, "bench"), weight(kIntermediate * 2, "bench"),
      normed(kHidden * 2, "bench"), gate_up(2 * kIntermediate * 2, "bench"), act(kIntermediate * 2, "bench"),
      qkv(kQkvWidth * 2, "bench"), q(kHeads * kHeadDim * 2, "bench"), cache(2 * 16 * kKvHeads * kHeadDim * 2, "bench"),
      meta(64, "bench"), inv_freq(kHeadDim / 2 * 4, "bench");
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

void Bench::sampling(const char* name, int rows, const DeviceSamplingParams& params, int history, bool spikes) {
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

}  // namespace qinfer::cuda::bench
