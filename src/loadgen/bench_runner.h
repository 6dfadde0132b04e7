// `qinfer bench serve` without the flag parsing: resolves the model, makes the prompts, runs each load level of the
// sweep through one StreamClient while a GpuSampler reads /metrics, and returns the report.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/bench_report.h"
#include "loadgen/progress_display.h"

namespace qinfer::loadgen {

struct BenchOptions {
  std::string url;                    // the server, e.g. http://127.0.0.1:8000 (a trailing "/" or "/v1" is ignored)
  std::string api_key;                // `Authorization: Bearer KEY` on every request when not empty
  std::string model;                  // empty: the first id of GET /v1/models
  bool chat = false;                  // /v1/chat/completions instead of /v1/completions
  nlohmann::json extra_body;          // an object merged into every request body (--extra-body); null: none
  std::vector<int> concurrencies;     // a level per value: num_prompts requests, this many in flight
  std::vector<double> request_rates;  // a level per value: Poisson arrivals at this rate (instead of concurrencies)
  int max_concurrency = 0;            // with request rates: cap on requests in flight (0: none)
  int num_prompts = 100;
  std::string dataset = "random";  // "random" or a JSONL file (see workload.h)
  int input_len = 1024;
  int output_len = 128;
  // Mixed workload: long_requests long prompts of long_input_len tokens (random, like --input-len) per level, beside
  // the level's num_prompts requests and outside its concurrency or rate, at most long_concurrency in flight;
  // long_output_len 0: output_len. The report then has per-class numbers (short vs long).
  int long_requests = 0;
  int long_input_len = 0;
  int long_output_len = 0;
  int long_concurrency = 1;
  // Documents asked about several times: each long prompt is sent this many times, the document followed by a
  // different question each time, one ask after the other (with long_concurrency 1 the later asks find the document
  // in the server's prefix cache). The later asks are reported as their own class (kLongRepeatClass).
  int long_questions = 1;
  uint64_t seed = 0;
  std::string tokenizer_dir;  // random prompts of exactly input_len tokens with this tokenizer.json; empty: words
  std::string label = "run";
  double request_timeout_seconds = 600;
  double metrics_interval_seconds = 0.5;
};

// Seconds from the start of a level at which each of `count` requests arrives: a Poisson process of `rate` per second,
// deterministic for a seed.
std::vector<double> poisson_arrivals(int count, double rate, uint64_t seed);

// "http://host:port/v1/" → "http://host:port".
std::string server_base_url(std::string url);

BenchReport run_bench(const BenchOptions& options, ProgressDisplay& progress);

}  // namespace qinfer::loadgen
