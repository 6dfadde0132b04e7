// Activation buffers of one forward pass, sized once for the largest batch the backend accepts. The final norm, logits
// and sampling scratch hold max_sequences sampled rows; a step that samples more (several positions of a sequence,
// speculative verification) computes and samples them in chunks of that many.
#pragma once

#include "backend/cuda/device_buffer.h"
#include "model/config.h"

namespace qinfer::cuda {

struct WorkspaceLimits {
  int max_tokens = 0;     // tokens in one batch
  int max_sequences = 0;  // sequences in one batch, and the sampled rows the logits hold at once
  int num_sms = 0;        // bounds the decode-attention splits
};

struct Workspace {
  Workspace(const ModelConfig& config, const WorkspaceLimits& limits);

  DeviceBuffer residual;        // [max_tokens, hidden] fp32 residual stream
  DeviceBuffer normed;          // [max_tokens, hidden] bf16 input of the next linear layer
  DeviceBuffer qkv;             // [max_tokens, q_width + 2 * kv_width] bf16
  DeviceBuffer q;               // [max_tokens, q_width] bf16 after q_norm and RoPE
  DeviceBuffer attention;       // [max_tokens, q_width] bf16
  DeviceBuffer delta;           // [max_tokens, hidden] bf16 output of o_proj / down_proj
  DeviceBuffer gate_up;         // [max_tokens, 2 * intermediate] bf16
  DeviceBuffer activation;      // [max_tokens, intermediate] bf16
  DeviceBuffer final_normed;    // [max_sequences, hidden] bf16
  DeviceBuffer logits;          // [max_sequences, vocab] fp32
  DeviceBuffer sample_work;     // [max_sequences, vocab] fp32
  DeviceBuffer sample_probs;    // [max_sequences, vocab] fp32
  DeviceBuffer split_counters;  // [max_sequences, num_kv_heads] uint32: decode attention's split arrivals
  DeviceBuffer sample_stats;    // [max_sequences, sampling_chunks(vocab)] LogitsChunkStats
  DeviceBuffer split_out;       // [max_split_rows, num_heads, head_dim] fp32, decode attention partials
  DeviceBuffer split_lse;       // [max_split_rows, num_heads] fp32
  DeviceBuffer results;         // [max_results] SampledToken
  PinnedBuffer host_results;    // [max_results] SampledToken
  int max_logit_rows = 0;       // max_sequences: rows of final_normed, logits and the sampling scratch
  int max_results = 0;          // sampled rows of one step: every token of the largest batch, or a padded decode
  int max_split_rows = 0;       // bound on num_decode * num_splits
  size_t bytes = 0;
};

}  // namespace qinfer::cuda
