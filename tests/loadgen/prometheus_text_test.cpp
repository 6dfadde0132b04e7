// Prometheus text parsing and the GPU gauges, on text in the shape qinfer's /metrics serves.
#include "loadgen/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/gpu_sampler.h"

namespace qinfer::loadgen {
namespace {

constexpr const char* kTwoGpus =
    "# HELP qinfer_requests_running Sequences in the engine's running batch\n"
    "# TYPE qinfer_requests_running gauge\n"
    "qinfer_requests_running 3\n"
    "qinfer_gpu_utilization_ratio{gpu=\"0\"} 0.5\n"
    "qinfer_gpu_utilization_ratio{gpu=\"1\"} 0.25\r\n"
    "qinfer_gpu_memory_used_bytes{gpu=\"0\"} 1e9\n"
    "qinfer_gpu_memory_used_bytes{gpu=\"1\"} 3000000000\n"
    "qinfer_gpu_memory_total_bytes{gpu=\"0\"} 8e9\n"
    "qinfer_gpu_memory_total_bytes{gpu=\"1\"} 8e9\n"
    "qinfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 12\n";

TEST(PrometheusText, ParsesNamesLabelsAndValues) {
  const std::vector<PrometheusSample> samples = parse_prometheus_text(kTwoGpus);
  ASSERT_EQ(samples.size(), 8u);
  EXPECT_EQ(samples[0].name, "qinfer_requests_running");
  EXPECT_TRUE(samples[0].labels.empty());
  EXPECT_EQ(samples[0].value, 3);
  EXPECT_EQ(samples[2].labels.at("gpu"), "1");
  EXPECT_EQ(samples[3].value, 1e9);
  EXPECT_EQ(samples[7].labels.at("le"), "+Inf");
}

TEST(PrometheusText, EscapedLabelValuesTimestampsAndSpecialValues) {
  const std::vector<PrometheusSample> samples =
      parse_prometheus_text("m{path=\"a\\\"b\\\\c\\nd\",x=\"1\"} 2 1700000000000\nn NaN\np +Inf\nq -Inf\n");
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].labels.at("path"), "a\"b\\c\nd");
  EXPECT_EQ(samples[0].labels.at("x"), "1");
  EXPECT_EQ(samples[0].value, 2);
  EXPECT_TRUE(std::isnan(samples[1].value));
  EXPECT_TRUE(std::isinf(samples[2].value) && samples[2].value > 0);
  EXPECT_TRUE(std::isinf(samples[3].value) && samples[3].value < 0);
}

TEST(PrometheusText, MalformedLinesAreSkipped) {
  const std::vector<PrometheusSample> samples =
      parse_prometheus_text("ok 1\n{nolabelname} 2\nbad{gpu=\"0\" 3\nnovalue\nx notanumber\n  \nalso_ok 4");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].name, "ok");
  EXPECT_EQ(samples[1].name, "also_ok");
  EXPECT_EQ(samples[1].value, 4);
}

TEST(PrometheusText, GpuReadingAveragesUtilisationAndSumsMemory) {
  const GpuReading reading = gpu_reading(parse_prometheus_text(kTwoGpus));
  ASSERT_TRUE(reading.utilization_ratio && reading.memory_used_bytes && reading.memory_total_bytes);
  EXPECT_DOUBLE_EQ(*reading.utilization_ratio, 0.375);
  EXPECT_DOUBLE_EQ(*reading.memory_used_bytes, 4e9);
  EXPECT_DOUBLE_EQ(*reading.memory_total_bytes, 16e9);
}

TEST(PrometheusText, AbsentGpuGaugesAreNull) {
  const GpuReading reading = gpu_reading(parse_prometheus_text("qinfer_requests_running 0\n"));
  EXPECT_FALSE(reading.utilization_ratio);
  EXPECT_FALSE(reading.memory_used_bytes);
  EXPECT_FALSE(reading.memory_total_bytes);
}

TEST(GpuSummary, MeanMaxAndPeakOverReadings) {
  const GpuSummary summary =
      summarize_gpu({GpuReading{0.2, 1e9, 8e9}, GpuReading{0.6, 3e9, 8e9}, GpuReading{std::nullopt, 2e9, 8e9}}, 3);
  EXPECT_EQ(summary.samples, 3);
  EXPECT_DOUBLE_EQ(*summary.utilization_mean, 0.4);
  EXPECT_DOUBLE_EQ(*summary.utilization_max, 0.6);
  EXPECT_DOUBLE_EQ(*summary.memory_used_peak_bytes, 3e9);
  EXPECT_DOUBLE_EQ(*summary.memory_used_mean_bytes, 2e9);
  EXPECT_DOUBLE_EQ(*summary.memory_total_bytes, 8e9);
  const GpuSummary none = summarize_gpu({}, 0);
  EXPECT_FALSE(none.utilization_mean || none.memory_used_peak_bytes || none.memory_total_bytes);
}

TEST(PrometheusText, SpeculationCounters) {
  EXPECT_FALSE(speculation_counters(parse_prometheus_text(kTwoGpus)).has_value());
  const std::optional<SpeculationCounters> counters = speculation_counters(
      parse_prometheus_text("qinfer_spec_decode_num_drafts_total 26\n"
                            "qinfer_spec_decode_draft_tokens_total 101\n"
                            "qinfer_spec_decode_accepted_tokens_total 99\n"
                            "qinfer_spec_decode_accepted_tokens_per_position_total{position=\"0\"} 26\n"
                            "qinfer_spec_decode_mean_accepted_length 4.8\n"));
  ASSERT_TRUE(counters.has_value());
  EXPECT_EQ(counters->num_drafts, 26);
  EXPECT_EQ(counters->draft_tokens, 101);
  EXPECT_EQ(counters->accepted_tokens, 99);
}

}  // namespace
}  // namespace qinfer::loadgen
