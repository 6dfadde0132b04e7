// The start-up log of `qinfer serve`: one line with the engine configuration, one with the memory plan, and where the
// time to ready went.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"

namespace qinfer::cli {

// "engine: cpu, context 1024, max-num-seqs 256, max-num-batched-tokens 8192, prefix caching on, chunked prefill on,
// scheduling fcfs, KV bf16 in blocks of 16, CUDA graphs on" (the CPU backend: KV fp32, no graphs)
std::string engine_summary(const Backend& backend, const BackendOptions& backend_options, const EngineOptions& engine);

// "memory plan: weights 1.19 GiB, activations 312 MiB, graphs n/a, KV cache 2.00 GiB = 1024 blocks x 16 = 16384
// tokens (16.0 sequences of 1024)[, device 139 GiB, budget 125 GiB]"
std::string memory_summary(const MemoryPlan& plan, int max_model_len);

// "ready in 2.31 s (tokenizer 0.05 s, weights 0.10 s, backend 1.90 s, warm-up 0.26 s)"
std::string startup_time_summary(double total_seconds, const std::vector<std::pair<std::string, double>>& phases);

}  // namespace qinfer::cli
