#include "server/vllm_metrics.h"

#include <vector>

namespace qinfer::server {
namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py), so that histogram_quantile over them gives what it gives on vLLM.
const std::vector<double> kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                      0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                                      20.0,  40.0,  80.0, 160., 640., 2560.};
const std::vector<double> kPerTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                              0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,   1.0,   1.5,   2.0,   2.5,
                                                    5.0,  10.0, 15.0,  20.0,  30.0,  40.0,  50.0,
                                                    60.0, 120., 240.0, 480.0, 960.0, 1920., 7680.};

MetricLabels engine_labels(const std::string& model_name) { return {{"model_name", model_name}, {"engine", "0"}}; }

}  // namespace

VllmMetrics::VllmMetrics(MetricsRegistry& registry, const std::string& model_name)
    : time_to_first_token(registry.histogram("vllm:time_to_first_token_seconds",
                                             "Histogram of time to first token in seconds.", kTimeToFirstTokenBuckets,
                                             engine_labels(model_name))),
      inter_token_latency(registry.histogram("vllm:inter_token_latency_seconds",
                                             "Histogram of inter-token latency in seconds.", kPerTokenBuckets,
                                             engine_labels(model_name))),
      time_per_output_token(registry.histogram("vllm:time_per_output_token_seconds",
                                               "Histogram of time per output token in seconds.", kPerTokenBuckets,
                                               engine_labels(model_name))),
      e2e_request_latency(registry.histogram("vllm:e2e_request_latency_seconds",
                                             "Histogram of e2e request latency in seconds.", kRequestLatencyBuckets,
                                             engine_labels(model_name))),
      request_queue_time(registry.histogram("vllm:request_queue_time_seconds",
                                            "Histogram of time spent in WAITING phase for request.",
                                            kRequestLatencyBuckets, engine_labels(model_name))),
      prompt_tokens(registry.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
                                     engine_labels(model_name))),
      generation_tokens(registry.counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
                                         engine_labels(model_name))),
      registry_(registry),
      labels_(engine_labels(model_name)) {
  // vLLM exports every finish reason from the start, at 0.
  for (const char* reason : {"stop", "length", "abort"}) request_success(reason);
}

Counter& VllmMetrics::request_success(const std::string& vllm_reason) {
  MetricLabels labels = labels_;
  labels.emplace_back("finished_reason", vllm_reason);
  return registry_.counter("vllm:request_success_total", "Count of successfully processed requests.", labels);
}

void VllmMetrics::count_finish(const std::string& qinfer_reason) {
  const char* reason = qinfer_reason == "stop" || qinfer_reason == "tool_calls" ? "stop"
                       : qinfer_reason == "length"                              ? "length"
                                                                                : "abort";
  request_success(reason).inc();
}

void VllmMetrics::refresh(const EngineStats& engine, double kv_cache_usage) {
  registry_.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels_)
      .set(engine.num_running);
  registry_.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels_)
      .set(engine.num_waiting);
  registry_.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels_)
      .set(kv_cache_usage);
  registry_.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage (older name).", labels_)
      .set(kv_cache_usage);
  registry_
      .counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
               labels_)
      .set_total(static_cast<double>(engine.blocks.prefix_query_tokens));
  registry_.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", labels_)
      .set_total(static_cast<double>(engine.blocks.prefix_hit_tokens));
  registry_.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", labels_)
      .set_total(static_cast<double>(engine.scheduler.preemptions));
}

}  // namespace qinfer::server
