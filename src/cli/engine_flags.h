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
  std::string scheduling_policy = "fcfs";
};

// --max-num-seqs and --max-num-batched-tokens land in `backend` (the backend sizes its buffers by them and the engine
// must use the same limits); the rest in `flags`.
void add_engine_flags(CLI::App& cmd, BackendOptions& backend, EngineFlags& flags);

// EngineOptions with the limits the backend was created with.
EngineOptions engine_options_from_flags(const BackendOptions& backend, const EngineFlags& flags);

}  // namespace qinfer::cli
