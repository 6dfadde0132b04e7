// Engine flags shared by the commands that run the engine (serve, bench throughput), named as in vLLM.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "backend/backend.h"
#include "engine/engine.h"

namespace qinfer::cli {

struct EngineFlags {
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  int32_t long_prefill_token_threshold = 0;
  int32_t max_num_partial_prefills = 0;
  int32_t max_long_partial_prefills = 0;
  bool enable_cost_based_chunking = true;
  double target_itl_ms = 50;  // bench throughput: 0 (offline work has no inter-token latency to keep)
  std::string scheduling_policy = "fcfs";
  std::string speculative_config;  // JSON (speculative_config.h); empty: no speculation
};

// --max-num-seqs and --max-num-batched-tokens land in `backend` (the backend sizes its buffers by them and the engine
// must use the same limits); the rest in `flags`.
void add_engine_flags(CLI::App& cmd, BackendOptions& backend, EngineFlags& flags);

// --speculative-config (in add_engine_flags; alone for the commands without the other engine flags), checked while
// the command line is parsed.
void add_speculative_config_flag(CLI::App& cmd, std::string& json);

// EngineOptions with the limits the backend was created with. Throws Error(kInvalidArgument) for a bad
// --speculative-config.
EngineOptions engine_options_from_flags(const BackendOptions& backend, const EngineFlags& flags);

}  // namespace qinfer::cli
