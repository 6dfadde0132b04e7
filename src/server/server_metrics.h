// The qinfer_* metrics (GUIDE §8): latency histograms and request/token counters updated by the handlers, engine
// gauges and totals refreshed from EngineStats at scrape time.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/gpu_probe.h"
#include "server/metrics_registry.h"

namespace qinfer::server {

class ServerMetrics {
  // First member: the references below are initialised from it.
  MetricsRegistry registry_;

 public:
  ServerMetrics();

  Histogram& time_to_first_token;
  Histogram& inter_token_latency;
  Histogram& e2e_request_latency;
  Histogram& request_queue_time;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Counter& response_cache_hits;
  Counter& response_cache_misses;
  Counter& client_disconnects;

  // Requests answered, by HTTP status.
  void count_status(int status);
  // Finished generations, by finish reason ("stop", "length", "tool_calls", "abort", ...).
  void count_finish(const std::string& reason);

  // Refreshes the engine-derived series (nullptr while the model loads) and the GPU gauges, and renders everything.
  std::string render(const EngineStats* engine, const std::vector<GpuReading>& gpus);

  MetricsRegistry& registry() { return registry_; }
};

}  // namespace qinfer::server
