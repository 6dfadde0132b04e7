#include "server/server_metrics.h"

#include <cstdio>

#include "util/logging.h"

namespace qinfer::server {
namespace {

// Latency buckets from 1 ms to 10 min: fine where interactive latencies sit, coarse for long generations.
const std::vector<double>& request_latency_buckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25, 0.5,  0.75,
                                               1.0,   2.5,    5.0,   7.5,  10.0,  20.0, 30.0,  60.0, 120., 300., 600.};
  return kBuckets;
}

// Per-token gaps: 100 µs to 2.5 s.
const std::vector<double>& token_latency_buckets() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015,
                                               0.02,   0.025,   0.03,   0.04,  0.05,   0.075, 0.1,  0.15,
                                               0.2,    0.3,     0.4,    0.5,   0.75,   1.0,   2.5};
  return kBuckets;
}

constexpr const char* kGpuUtilization = "qinfer_gpu_utilization_ratio";
constexpr const char* kGpuUtilizationHelp = "Fraction of time a kernel ran on the GPU (NVML)";
constexpr const char* kGpuMemoryUsed = "qinfer_gpu_memory_used_bytes";
constexpr const char* kGpuMemoryUsedHelp = "GPU memory in use (NVML)";
constexpr const char* kGpuMemoryTotal = "qinfer_gpu_memory_total_bytes";
constexpr const char* kGpuMemoryTotalHelp = "GPU memory in total (NVML)";

// qinfer's histogram and, when vLLM's names are on, vLLM's twin of it.
std::vector<Histogram*> with_twin(Histogram& own, Histogram* twin) {
  std::vector<Histogram*> set = {&own};
  if (twin) set.push_back(twin);
  return set;
}

std::string seconds_text(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f s", *seconds);
  return buffer;
}

}  // namespace

std::string request_log_line(const FinishedRequest& r) {
  std::string reasons;
  for (const std::string& reason : r.finish_reasons) reasons += (reasons.empty() ? "" : ",") + reason;
  return "request " + std::to_string(r.engine_id) + " " + r.id + ": prompt " + std::to_string(r.prompt_tokens) +
         " tokens (" + std::to_string(r.cached_tokens) + " cached), output " + std::to_string(r.output_tokens) +
         " tokens, queue " + seconds_text(r.queue_seconds) + ", TTFT " + seconds_text(r.ttft_seconds) + ", duration " +
         seconds_text(r.duration_seconds) + ", finish " + (reasons.empty() ? "abort" : reasons);
}

ServerMetrics::ServerMetrics(const MetricsOptions& options)
    : vllm_(options.vllm_model_name ? std::make_unique<VllmMetrics>(registry_, *options.vllm_model_name) : nullptr),
      time_to_first_token(with_twin(
          registry_.histogram("qinfer_time_to_first_token_seconds",
                              "Time from request arrival to the first generated token", request_latency_buckets()),
          vllm_ ? &vllm_->time_to_first_token : nullptr)),
      inter_token_latency([&] {
        std::vector<Histogram*> set = {&registry_.histogram("qinfer_inter_token_latency_seconds",
                                                            "Time between consecutive output deltas of one sample",
                                                            token_latency_buckets())};
        if (vllm_) set.insert(set.end(), {&vllm_->inter_token_latency, &vllm_->time_per_output_token});
        return set;
      }()),
      request_queue_time(
          with_twin(registry_.histogram("qinfer_request_queue_time_seconds",
                                        "Time a request waited for a server slot (--max-concurrent-requests)",
                                        request_latency_buckets()),
                    vllm_ ? &vllm_->request_queue_time : nullptr)),
      response_cache_hits(registry_.counter("qinfer_response_cache_hits_total", "Requests answered from the cache")),
      response_cache_misses(
          registry_.counter("qinfer_response_cache_misses_total", "Cacheable requests not found in the cache")),
      client_disconnects(registry_.counter("qinfer_client_disconnects_total",
                                           "Streams whose client went away before the end (request aborted)")),
      e2e_request_latency_(
          with_twin(registry_.histogram("qinfer_e2e_request_latency_seconds",
                                        "Time from request arrival to its last token", request_latency_buckets()),
                    vllm_ ? &vllm_->e2e_request_latency : nullptr)),
      prompt_tokens_(registry_.counter("qinfer_prompt_tokens_total", "Prompt tokens of finished requests")),
      generation_tokens_(registry_.counter("qinfer_generation_tokens_total", "Generated tokens of finished requests")),
      log_requests_(options.log_requests) {
  declare_gpu_gauges();
}

void ServerMetrics::declare_gpu_gauges() {
  registry_.declare_gauge(kGpuUtilization, kGpuUtilizationHelp);
  registry_.declare_gauge(kGpuMemoryUsed, kGpuMemoryUsedHelp);
  registry_.declare_gauge(kGpuMemoryTotal, kGpuMemoryTotalHelp);
}

void ServerMetrics::count_status(int status) {
  registry_
      .counter("qinfer_http_requests_total", "HTTP requests answered, by status code",
               {{"code", std::to_string(status)}})
      .inc();
}

void ServerMetrics::record_finished(const FinishedRequest& request) {
  prompt_tokens_.inc(request.prompt_tokens);
  generation_tokens_.inc(request.output_tokens);
  e2e_request_latency_.observe(request.duration_seconds);
  if (vllm_) {
    vllm_->prompt_tokens.inc(request.prompt_tokens);
    vllm_->generation_tokens.inc(request.output_tokens);
  }
  for (const std::string& reason : request.finish_reasons) {
    registry_
        .counter("qinfer_request_success_total", "Finished generations, by finish reason",
                 {{"finished_reason", reason}})
        .inc();
    if (vllm_) vllm_->count_finish(reason);
  }
  if (log_requests_) spdlog::info("{}", request_log_line(request));
}

void ServerMetrics::set_memory_plan(const MemoryPlan& plan) {
  const auto part = [&](const char* name, std::optional<int64_t> bytes) {
    if (bytes)
      registry_
          .gauge("qinfer_memory_plan_bytes",
                 "Device memory the backend planned, by part (weights, activations, graphs, kv_cache; budget and "
                 "device_total for reference)",
                 {{"part", name}})
          .set(static_cast<double>(*bytes));
  };
  part("weights", plan.weights);
  part("activations", plan.activations);
  part("graphs", plan.graphs);
  part("kv_cache", plan.kv.bytes);
  part("budget", plan.budget);
  part("device_total", plan.device_total);
}

void ServerMetrics::refresh_speculation(const SpeculationStats& stats) {
  registry_.counter("qinfer_spec_decode_num_drafts_total", "Sequence steps that verified proposed tokens")
      .set_total(static_cast<double>(stats.verifications));
  registry_.counter("qinfer_spec_decode_draft_tokens_total", "Proposed tokens verified")
      .set_total(static_cast<double>(stats.draft_tokens));
  registry_.counter("qinfer_spec_decode_accepted_tokens_total", "Proposed tokens accepted as output")
      .set_total(static_cast<double>(stats.accepted_tokens));
  registry_
      .gauge("qinfer_spec_decode_mean_accepted_length",
             "Tokens a verifying sequence step produces on average: accepted proposals plus the sampled token")
      .set(stats.mean_accepted_length());
  for (size_t i = 0; i < stats.accepted_per_position.size(); ++i)
    registry_
        .counter("qinfer_spec_decode_accepted_tokens_per_position_total",
                 "Proposed tokens accepted, by position in the proposal (0: the first)",
                 {{"position", std::to_string(i)}})
        .set_total(static_cast<double>(stats.accepted_per_position[i]));
}

std::string ServerMetrics::render(const EngineStats* engine, const std::vector<GpuReading>& gpus) {
  Gauge& running = registry_.gauge("qinfer_requests_running", "Sequences in the engine's running batch");
  Gauge& waiting = registry_.gauge("qinfer_requests_waiting", "Sequences waiting in the engine's queue");
  Gauge& kv_usage = registry_.gauge("qinfer_kv_cache_usage_ratio", "Fraction of KV-cache blocks in use");
  Counter& prefix_queries =
      registry_.counter("qinfer_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache");
  Counter& prefix_hits = registry_.counter("qinfer_prefix_cache_hits_total", "Prompt tokens found in the prefix cache");
  Counter& preemptions = registry_.counter("qinfer_num_preemptions_total", "Sequences preempted by the scheduler");
  Counter& steps = registry_.counter("qinfer_engine_steps_total", "Engine steps (batches) run");
  Gauge& batch_size = registry_.gauge("qinfer_batch_size", "Sequences in the engine's last step (0 when idle)");
  if (engine) {
    running.set(engine->num_running);
    waiting.set(engine->num_waiting);
    kv_usage.set(engine->num_blocks > 0
                     ? 1.0 - static_cast<double>(engine->num_free_blocks) / static_cast<double>(engine->num_blocks)
                     : 0.0);
    batch_size.set(engine->batch_sequences);
    if (vllm_) vllm_->refresh(*engine, kv_usage.value());
    prefix_queries.set_total(static_cast<double>(engine->blocks.prefix_query_tokens));
    prefix_hits.set_total(static_cast<double>(engine->blocks.prefix_hit_tokens));
    preemptions.set_total(static_cast<double>(engine->scheduler.preemptions));
    steps.set_total(static_cast<double>(engine->scheduler.steps));
    set_memory_plan(engine->memory);
    if (engine->speculation_active) refresh_speculation(engine->scheduler.speculation);
  }
  for (const GpuReading& gpu : gpus) {
    const MetricLabels labels = {{"gpu", std::to_string(gpu.index)}};
    registry_.gauge(kGpuUtilization, kGpuUtilizationHelp, labels).set(gpu.utilization_ratio);
    registry_.gauge(kGpuMemoryUsed, kGpuMemoryUsedHelp, labels).set(static_cast<double>(gpu.memory_used_bytes));
    registry_.gauge(kGpuMemoryTotal, kGpuMemoryTotalHelp, labels).set(static_cast<double>(gpu.memory_total_bytes));
  }
  return registry_.render();
}

}  // namespace qinfer::server
