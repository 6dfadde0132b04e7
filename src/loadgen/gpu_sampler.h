// Samples the server's GPU gauges from GET /metrics every interval on its own thread while a load level runs.
// A server without /metrics or without the gauges gives a summary with nulls, never an error.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/prometheus_text.h"
#include "util/curl_api.h"

namespace qinfer::loadgen {

struct GpuSummary {
  int samples = 0;  // /metrics answers with status 200 during the level
  std::optional<double> utilization_mean;
  std::optional<double> utilization_max;
  std::optional<double> memory_used_peak_bytes;
  std::optional<double> memory_used_mean_bytes;
  std::optional<double> memory_total_bytes;
};

// Mean/max/peak over the readings that carry each gauge.
GpuSummary summarize_gpu(const std::vector<GpuReading>& readings, int samples);

class GpuSampler {
 public:
  // metrics_url: the full URL of /metrics. Starts sampling at once (first sample immediately).
  GpuSampler(const CurlApi& curl, std::string metrics_url, std::string api_key, double interval_seconds);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Stops the thread (idempotent) and summarises what it read.
  GpuSummary stop();

 private:
  void run();

  const CurlApi& curl_;
  std::string url_;
  std::string api_key_;
  double interval_seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<GpuReading> readings_;  // guarded by mutex_
  int samples_ = 0;                   // guarded by mutex_
  std::thread thread_;
};

}  // namespace qinfer::loadgen
