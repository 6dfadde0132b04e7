// Kernel microbenchmarks on Qwen3-4B shapes (kernel_bench.h lists the groups): the table of measurements and main().
#include "kernel_bench.h"

namespace qinfer::cuda::bench {

void Bench::record(const std::string& kernel, const std::string& shape, double seconds, double amount, bool bandwidth) {
  const Row row{kernel, shape, seconds, amount / seconds, bandwidth};
  print(row);
  rows_.push_back(row);
}

void Bench::summary() const {
  std::printf("\n| kernel | shape | time (us) | achieved | %% of ceiling |\n|---|---|---|---|---|\n");
  for (const Row& r : rows_) print_table_row(r);
}

void Bench::print(const Row& r) {
  std::printf("%-18s %-52s %10.2f us  %s\n", r.kernel.c_str(), r.shape.c_str(), r.seconds * 1e6, rate_text(r).c_str());
  std::fflush(stdout);
}

void Bench::print_table_row(const Row& r) {
  std::printf("| %s | %s | %.2f | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.seconds * 1e6,
              rate_text(r, " | ").c_str());
}

std::string Bench::rate_text(const Row& r, const char* separator) {
  char text[96];
  if (r.bandwidth)
    std::snprintf(text, sizeof(text), "%.3f TB/s%s%.1f %%", r.rate / 1e12, separator, 100 * r.rate / kCopyCeiling);
  else
    std::snprintf(text, sizeof(text), "%.1f TFLOP/s%s%.1f %%", r.rate / 1e12, separator, 100 * r.rate / kMatmulCeiling);
  return text;
}

}  // namespace qinfer::cuda::bench

// Optional argument: run only one group of cases (copy, linear, quantized (every warp count when named), gemm,
// decode_attention, prefill_attention, small_ops, kv_gather, sampling); the copy ceiling always runs first.
// `decode_attention SEQUENCES CONTEXT [TOKENS_PER_SPLIT...]` runs that one case (for profilers), the fp8 kernel also
// with each split size given, as does `prefill_attention LENGTH`; `prefill_step [TOKENS]` and `decode_step [SEQUENCES
// [CONTEXT]]` (not in the default run) break one step down by kernel, the latter after timing every decode linear at 8,
// 64 and 128 rows (GEMV where it applies, cuBLASLt).
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
  if (wants("quantized")) {  // the 4B's decode linears over int4 and fp8 weights
    using qinfer::cuda::QuantizedFormat;
    const std::vector<int> decode_rows = {1, 2, 4, 8, 16, 17, 32, 64, 128};
    const bool sweep = only == "quantized";
    for (const QuantizedFormat format : {QuantizedFormat::kInt4, QuantizedFormat::kFp8Block}) {
      bench.quantized_linear("qkv", format, 6144, 2560, decode_rows, sweep);
      bench.quantized_linear("o_proj", format, 2560, 4096, decode_rows, sweep);
      bench.quantized_linear("gate_up", format, 2 * 9728, 2560, decode_rows, sweep, true);
      bench.quantized_linear("down", format, 2560, 9728, decode_rows, sweep);
    }
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
