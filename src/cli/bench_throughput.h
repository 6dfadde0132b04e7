// `qinfer bench throughput`: offline throughput of the engine (continuous batching over the backend) on random or
// dataset prompts. cmd_bench.cpp registers it on the `bench` parent command.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"

namespace qinfer::cli {

void register_bench_throughput(CLI::App& bench);

struct ThroughputWorkload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> max_tokens;  // per prompt
  bool ignore_eos = false;          // random prompts: every request yields exactly max_tokens
};

// num_prompts prompts of input_len random ids (the first shared_prefix_len of them the same in every prompt),
// each to generate exactly output_len tokens. Deterministic for a seed.
ThroughputWorkload random_workload(int num_prompts, int input_len, int output_len, int shared_prefix_len,
                                   int vocab_size, uint64_t seed);

// JSONL, one request per line: {"prompt_ids": [ids...], "output_len": N (optional, else default_output_len)}.
// Throws Error(kFormat) naming the file, line and field.
ThroughputWorkload read_dataset(const std::filesystem::path& path, int vocab_size, int default_output_len);

struct ThroughputReport {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double elapsed_s = 0;
  double mean_batch_size = 0;
  double host_overhead_per_step_s = 0;  // engine step wall time outside Backend::step(), mean over steps
  double backend_fraction = 0;          // share of the elapsed time spent inside Backend::step()
  double prefix_cache_hit_rate = 0;
  uint64_t preemptions = 0;
  double mean_ttft_s = 0;
  double median_ttft_s = 0;
  SpeculationStats speculation;  // with --speculative-config
  nlohmann::json to_json() const;
};

// Submits the whole workload at once and steps the engine until every request finished. `draft`: the draft model's
// backend for draft_model speculation.
ThroughputReport run_throughput(Backend& backend, const EngineOptions& options, const ThroughputWorkload& workload,
                                Backend* draft = nullptr);

}  // namespace qinfer::cli
