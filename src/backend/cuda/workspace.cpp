#include "backend/cuda/workspace.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/decode_attention/plan.h"
#include "backend/cuda/kernels/sampling.h"

namespace qinfer::cuda {

Workspace::Workspace(const ModelConfig& c, const WorkspaceLimits& limits) {
  const size_t tokens = static_cast<size_t>(limits.max_tokens);
  const size_t sequences = static_cast<size_t>(limits.max_sequences);
  const size_t hidden = static_cast<size_t>(c.hidden_size), inter = static_cast<size_t>(c.intermediate_size);
  const size_t q_width = static_cast<size_t>(c.q_width()), kv_width = static_cast<size_t>(c.kv_width());
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  max_split_rows = decode_attention_max_split_rows(limits.max_sequences, limits.num_sms);
  max_logit_rows = limits.max_sequences;
  max_results = std::max(limits.max_tokens, limits.max_sequences);
  auto make = [&](size_t bytes, const char* what) {
    this->bytes += bytes;
    return DeviceBuffer(bytes, what);
  };
  residual = make(tokens * hidden * 4, "residual stream");
  normed = make(tokens * hidden * 2, "normed activations");
  qkv = make(tokens * (q_width + 2 * kv_width) * 2, "qkv activations");
  q = make(tokens * q_width * 2, "rotated queries");
  attention = make(tokens * q_width * 2, "attention output");
  delta = make(tokens * hidden * 2, "layer output");
  gate_up = make(tokens * 2 * inter * 2, "gate/up activations");
  activation = make(tokens * inter * 2, "MLP activations");
  final_normed = make(sequences * hidden * 2, "final norm output");
  logits = make(sequences * vocab * 4, "logits");
  sample_work = make(sequences * vocab * 4, "sampling scratch");
  sample_probs = make(sequences * vocab * 4, "sampling scratch");
  sample_stats = make(sequences * static_cast<size_t>(sampling_chunks(c.vocab_size)) * sizeof(LogitsChunkStats),
                      "sampling scratch");
  split_out = make(static_cast<size_t>(max_split_rows) * q_width * 4, "decode attention partials");
  split_lse =
      make(static_cast<size_t>(max_split_rows) * static_cast<size_t>(c.num_heads) * 4, "decode attention partials");
  split_counters = make(sequences * static_cast<size_t>(c.num_kv_heads) * 4, "decode attention split counters");
  CUDA_CHECK(cudaMemset(split_counters.data(), 0, split_counters.bytes()));  // every launch leaves them at zero
  results = make(static_cast<size_t>(max_results) * sizeof(SampledToken), "sampling results");
  host_results = PinnedBuffer(static_cast<size_t>(max_results) * sizeof(SampledToken), "sampling results");
}

}  // namespace qinfer::cuda
