#include "cli/startup_summary.h"

#include <cstdio>

#include "util/byte_size.h"

namespace qinfer::cli {
namespace {

std::string part(const std::optional<int64_t>& bytes) { return bytes ? format_bytes(*bytes) : "n/a"; }
const char* on_off(bool on) { return on ? "on" : "off"; }

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f s", s);
  return buffer;
}

}  // namespace

std::string engine_summary(const Backend& backend, const BackendOptions& b, const EngineOptions& e) {
  const KvCacheShape kv = backend.kv_cache();
  // The CPU reference keeps a bf16-requested cache in fp32 and has no CUDA graphs.
  const bool cpu = backend.name() == "cpu";
  std::string line = "engine: " + backend.name() + ", context " + std::to_string(backend.max_model_len()) +
                     ", max-num-seqs " + std::to_string(e.max_num_seqs) + ", max-num-batched-tokens " +
                     std::to_string(e.max_num_batched_tokens) + ", prefix caching " + on_off(e.enable_prefix_caching) +
                     ", chunked prefill " + on_off(e.enable_chunked_prefill) + ", scheduling " +
                     scheduling_policy_name(e.policy) + ", KV " +
                     (cpu && kv.dtype == KvCacheDtype::kBf16 ? "fp32" : kv_cache_dtype_name(kv.dtype)) +
                     " in blocks of " + std::to_string(kv.block_size);
  if (!cpu) line += std::string(", CUDA graphs ") + on_off(b.cuda_graphs);
  const SpeculativeConfig& spec = e.speculation;
  if (spec.enabled() && backend.supports_multi_position_sampling())
    line += std::string(", speculative ") + speculative_method_name(spec.method) + " k " +
            std::to_string(spec.num_speculative_tokens) + " (" +
            (spec.method == SpeculativeMethod::kDraftModel
                 ? "draft " + spec.draft_model
                 : "lookup " + std::to_string(spec.prompt_lookup_min) + ".." + std::to_string(spec.prompt_lookup_max)) +
            ", off above " + std::to_string(spec.disable_by_batch_size) + " decoding sequences)";
  return line;
}

std::string memory_summary(const MemoryPlan& plan, int max_model_len) {
  const int64_t tokens = plan.kv.num_blocks * plan.kv.block_size;
  char sequences[64];
  std::snprintf(sequences, sizeof sequences, "%.1f sequences of %d", static_cast<double>(tokens) / max_model_len,
                max_model_len);
  std::string line = "memory plan: weights " + part(plan.weights) + ", activations " + part(plan.activations) +
                     ", graphs " + part(plan.graphs) + ", KV cache " + format_bytes(plan.kv.bytes) + " = " +
                     std::to_string(plan.kv.num_blocks) + " blocks x " + std::to_string(plan.kv.block_size) + " = " +
                     std::to_string(tokens) + " tokens (" + sequences + ")";
  if (plan.device_total) line += ", device " + format_bytes(*plan.device_total);
  if (plan.budget) line += ", budget " + format_bytes(*plan.budget);
  return line;
}

std::string startup_time_summary(double total_seconds, const std::vector<std::pair<std::string, double>>& phases) {
  std::string line = "ready in " + seconds(total_seconds) + " (";
  for (size_t i = 0; i < phases.size(); ++i)
    line += (i ? ", " : "") + phases[i].first + " " + seconds(phases[i].second);
  return line + ")";
}

}  // namespace qinfer::cli
