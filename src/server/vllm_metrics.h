// --metrics-compat vllm: the series qinfer has, also under vLLM's metric names, labels (model_name, engine="0") and
// histogram buckets, so dashboards and alerts built on vLLM's /metrics keep working. Registered in the same registry
// as the qinfer_* series and updated from the same observations.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/metrics_registry.h"

namespace qinfer::server {

class VllmMetrics {
 public:
  VllmMetrics(MetricsRegistry& registry, const std::string& model_name);

  Histogram& time_to_first_token;    // vllm:time_to_first_token_seconds
  Histogram& inter_token_latency;    // vllm:inter_token_latency_seconds
  Histogram& time_per_output_token;  // vllm:time_per_output_token_seconds (the older name of the same series)
  Histogram& e2e_request_latency;    // vllm:e2e_request_latency_seconds
  Histogram& request_queue_time;     // vllm:request_queue_time_seconds
  Counter& prompt_tokens;            // vllm:prompt_tokens_total
  Counter& generation_tokens;        // vllm:generation_tokens_total

  // vllm:request_success_total{finished_reason}: vLLM's reasons are stop, length and abort (a tool call ends with
  // stop).
  void count_finish(const std::string& qinfer_reason);
  // The gauges and engine totals: requests running / waiting, KV-cache usage, prefix-cache queries / hits,
  // preemptions.
  void refresh(const EngineStats& engine, double kv_cache_usage);

 private:
  Counter& request_success(const std::string& vllm_reason);

  MetricsRegistry& registry_;
  const MetricLabels labels_;
};

}  // namespace qinfer::server
