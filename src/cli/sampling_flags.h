// The sampling options shared by `qinfer generate` and `qinfer bench latency`: one set of flag names and help texts,
// validated the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>

#include "backend/sampling.h"

namespace qinfer::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p;
  std::optional<int> top_k;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t seed = 0;
  int logprobs = 0;
};

// Adds --temperature, --top-k, --top-p, --min-p, the three penalties, --seed and --logprobs; `unset_note` says what an
// unset temperature / top-k / top-p / min-p falls back to.
void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags, const char* unset_note);

// The flags as SamplingParams, with unset temperature / top-k / top-p / min-p taken from `defaults`. Throws an
// invalid-argument Error naming the value out of range.
SamplingParams sampling_params_from_flags(const SamplingFlags& flags, const SamplingParams& defaults, int vocab_size);

}  // namespace qinfer::cli
