// --metrics-compat vllm (vLLM's names, labels and buckets beside qinfer's), qinfer_batch_size, the declared GPU gauges,
// the memory plan by part, and the per-request log line.
#include <gtest/gtest.h>

#include "server/server_metrics.h"

namespace qinfer::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

FinishedRequest finished(const std::string& reason) {
  FinishedRequest r;
  r.engine_id = 7;
  r.id = "chatcmpl-x";
  r.prompt_tokens = 12;
  r.cached_tokens = 3;
  r.output_tokens = 20;
  r.queue_seconds = 0.001;
  r.ttft_seconds = 0.052;
  r.duration_seconds = 0.431;
  r.finish_reasons = {reason};
  return r;
}

TEST(VllmMetrics, MirrorObservationsUnderVllmNamesWithModelName) {
  ServerMetrics metrics(MetricsOptions{.vllm_model_name = "qwen", .log_requests = false});
  metrics.time_to_first_token.observe(0.003);
  metrics.inter_token_latency.observe(0.02);
  metrics.request_queue_time.observe(0.4);
  metrics.record_finished(finished("tool_calls"));
  metrics.record_finished(finished("deadline"));
  EngineStats engine;
  engine.num_running = 2;
  engine.num_waiting = 1;
  engine.num_blocks = 10;
  engine.num_free_blocks = 6;
  engine.batch_sequences = 2;
  engine.blocks.prefix_query_tokens = 100;
  engine.blocks.prefix_hit_tokens = 40;
  engine.scheduler.preemptions = 3;
  const std::string text = metrics.render(&engine, {});
  const std::string labels = R"({model_name="qwen",engine="0")";
  // vLLM's TTFT buckets: 0.003 falls between 1 ms and 5 ms.
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.001"} 0)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="0.005"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_count" + labels + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "vllm:inter_token_latency_seconds_bucket" + labels + R"(,le="0.025"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:time_per_output_token_seconds_count" + labels + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "vllm:request_queue_time_seconds_bucket" + labels + R"(,le="0.5"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:e2e_request_latency_seconds_count" + labels + "} 2")) << text;
  EXPECT_TRUE(has_line(text, "vllm:prompt_tokens_total" + labels + "} 24")) << text;
  EXPECT_TRUE(has_line(text, "vllm:generation_tokens_total" + labels + "} 40")) << text;
  EXPECT_TRUE(has_line(text, "vllm:request_success_total" + labels + R"(,finished_reason="stop"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:request_success_total" + labels + R"(,finished_reason="abort"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:request_success_total" + labels + R"(,finished_reason="length"} 0)")) << text;
  EXPECT_TRUE(has_line(text, "vllm:num_requests_running" + labels + "} 2")) << text;
  EXPECT_TRUE(has_line(text, "vllm:num_requests_waiting" + labels + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "vllm:kv_cache_usage_perc" + labels + "} 0.4")) << text;
  EXPECT_TRUE(has_line(text, "vllm:prefix_cache_queries_total" + labels + "} 100")) << text;
  EXPECT_TRUE(has_line(text, "vllm:prefix_cache_hits_total" + labels + "} 40")) << text;
  EXPECT_TRUE(has_line(text, "vllm:num_preemptions_total" + labels + "} 3")) << text;
  // qinfer's own series are unchanged beside them.
  EXPECT_TRUE(has_line(text, R"(qinfer_request_success_total{finished_reason="tool_calls"} 1)")) << text;
  EXPECT_TRUE(has_line(text, "qinfer_time_to_first_token_seconds_count 1")) << text;
  EXPECT_TRUE(has_line(text, "qinfer_batch_size 2")) << text;
}

// The backend's memory plan, one series per part it reports; parts it does not report have none.
TEST(ServerMetrics, MemoryPlanByPart) {
  ServerMetrics metrics;
  EngineStats engine;
  engine.memory.weights = 2705326080;
  engine.memory.activations = 1438814208;
  engine.memory.budget = 24696061952;
  engine.memory.kv.bytes = 19948650496;
  const std::string text = metrics.render(&engine, {});
  EXPECT_TRUE(has_line(text, R"(qinfer_memory_plan_bytes{part="weights"} 2705326080)")) << text;
  EXPECT_TRUE(has_line(text, R"(qinfer_memory_plan_bytes{part="activations"} 1438814208)")) << text;
  EXPECT_TRUE(has_line(text, R"(qinfer_memory_plan_bytes{part="kv_cache"} 19948650496)")) << text;
  EXPECT_TRUE(has_line(text, R"(qinfer_memory_plan_bytes{part="budget"} 24696061952)")) << text;
  EXPECT_EQ(text.find(R"(part="graphs")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(part="device_total")"), std::string::npos) << text;
}

TEST(ServerMetrics, SpeculativeDecodingSeriesOnceActive) {
  ServerMetrics metrics;
  EngineStats engine;
  engine.num_blocks = 4;
  engine.scheduler.speculation.record(4, 4);
  engine.scheduler.speculation.record(3, 1);
  EXPECT_EQ(metrics.render(&engine, {}).find("qinfer_spec_decode"), std::string::npos);
  engine.speculation_active = true;
  const std::string text = metrics.render(&engine, {});
  EXPECT_TRUE(has_line(text, "qinfer_spec_decode_num_drafts_total 2")) << text;
  EXPECT_TRUE(has_line(text, "qinfer_spec_decode_draft_tokens_total 7")) << text;
  EXPECT_TRUE(has_line(text, "qinfer_spec_decode_accepted_tokens_total 5")) << text;
  EXPECT_TRUE(has_line(text, "qinfer_spec_decode_mean_accepted_length 3.5")) << text;
  EXPECT_TRUE(has_line(text, R"(qinfer_spec_decode_accepted_tokens_per_position_total{position="0"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(qinfer_spec_decode_accepted_tokens_per_position_total{position="3"} 1)")) << text;
}

TEST(VllmMetrics, AbsentUnlessAsked) {
  ServerMetrics metrics;
  metrics.time_to_first_token.observe(0.003);
  const std::string text = metrics.render(nullptr, {});
  EXPECT_EQ(text.find("vllm:"), std::string::npos) << text;
}

TEST(ServerMetrics, GpuGaugesAreDeclaredWithoutAGpu) {
  ServerMetrics metrics;
  const std::string text = metrics.render(nullptr, {});
  EXPECT_TRUE(has_line(text, "# TYPE qinfer_gpu_utilization_ratio gauge")) << text;
  EXPECT_EQ(text.find("qinfer_gpu_utilization_ratio{"), std::string::npos) << text;
  GpuReading gpu;
  gpu.utilization_ratio = 0.5;
  const std::string with_gpu = metrics.render(nullptr, {gpu});
  EXPECT_TRUE(has_line(with_gpu, R"(qinfer_gpu_utilization_ratio{gpu="0"} 0.5)")) << with_gpu;
}

TEST(RequestLog, OneLineWithTokensTimesAndFinishReason) {
  EXPECT_EQ(request_log_line(finished("stop")),
            "request 7 chatcmpl-x: prompt 12 tokens (3 cached), output 20 tokens, queue 0.001 s, TTFT 0.052 s, "
            "duration 0.431 s, finish stop");
  FinishedRequest none = finished("stop");
  none.ttft_seconds.reset();
  none.finish_reasons = {"length", "abort"};
  EXPECT_NE(request_log_line(none).find("TTFT -, duration 0.431 s, finish length,abort"), std::string::npos);
}

}  // namespace
}  // namespace qinfer::server
