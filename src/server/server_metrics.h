// The qinfer_* metrics (GUIDE §8): latency histograms and request/token counters updated by the handlers, engine
// gauges and totals refreshed from EngineStats at scrape time. With --metrics-compat vllm the same observations also
// feed vLLM's names (vllm_metrics.h). Each finished request is also logged in one line unless turned off.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/gpu_probe.h"
#include "server/metrics_registry.h"
#include "server/vllm_metrics.h"

namespace qinfer::server {

struct MetricsOptions {
  std::optional<std::string> vllm_model_name;  // set: also export vLLM's names with this model_name label
  bool log_requests = true;                    // one info line per finished request
};

// One observation recorded in qinfer's histogram and in its vLLM twins when those exist.
class HistogramSet {
 public:
  explicit HistogramSet(std::vector<Histogram*> histograms) : histograms_(std::move(histograms)) {}
  void observe(double value) {
    for (Histogram* histogram : histograms_) histogram->observe(value);
  }

 private:
  std::vector<Histogram*> histograms_;
};

// What the per-request log line and the end-of-request metrics are made of.
struct FinishedRequest {
  uint64_t engine_id = 0;
  std::string id;  // the API's id (chatcmpl-..., cmpl-...)
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t output_tokens = 0;
  std::optional<double> queue_seconds;      // absent when nothing came back
  std::optional<double> ttft_seconds;       // absent when no token came back
  double duration_seconds = 0;              // arrival to the end
  std::vector<std::string> finish_reasons;  // per choice; "abort" when a choice did not finish
};

// "request 7 chatcmpl-x: prompt 12 tokens (3 cached), output 20 tokens, queue 0.001 s, TTFT 0.052 s, duration
// 0.431 s, finish stop"
std::string request_log_line(const FinishedRequest& request);

class ServerMetrics {
  // First members: the references below are initialised from them.
  MetricsRegistry registry_;
  std::unique_ptr<VllmMetrics> vllm_;

 public:
  explicit ServerMetrics(const MetricsOptions& options = {});

  HistogramSet time_to_first_token;
  HistogramSet inter_token_latency;
  HistogramSet request_queue_time;
  Counter& response_cache_hits;
  Counter& response_cache_misses;
  Counter& client_disconnects;

  // Requests answered, by HTTP status.
  void count_status(int status);
  // A finished generation: token counters, e2e latency, finish reasons and (unless off) its log line.
  void record_finished(const FinishedRequest& request);

  // Refreshes the engine-derived series (nullptr while the model loads) and the GPU gauges, and renders everything.
  std::string render(const EngineStats* engine, const std::vector<GpuReading>& gpus);

  MetricsRegistry& registry() { return registry_; }

 private:
  // The GPU gauges exist (HELP and TYPE) from the start; their series appear with NVML readings.
  void declare_gpu_gauges();
  // qinfer_memory_plan_bytes{part}: the parts the backend reports.
  void set_memory_plan(const MemoryPlan& plan);
  // The qinfer_spec_decode_* series, once the engine runs speculative decoding.
  void refresh_speculation(const SpeculationStats& stats);

  HistogramSet e2e_request_latency_;
  Counter& prompt_tokens_;
  Counter& generation_tokens_;
  const bool log_requests_;
};

}  // namespace qinfer::server
