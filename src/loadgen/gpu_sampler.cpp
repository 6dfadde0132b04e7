#include "loadgen/gpu_sampler.h"

#include <algorithm>
#include <chrono>

#include "loadgen/http_get.h"

namespace qinfer::loadgen {

GpuSummary summarize_gpu(const std::vector<GpuReading>& readings, int samples) {
  GpuSummary summary;
  summary.samples = samples;
  double utilization_sum = 0;
  double memory_sum = 0;
  int utilization_count = 0;
  int memory_count = 0;
  for (const GpuReading& r : readings) {
    if (r.utilization_ratio) {
      utilization_sum += *r.utilization_ratio;
      ++utilization_count;
      summary.utilization_max = std::max(summary.utilization_max.value_or(*r.utilization_ratio), *r.utilization_ratio);
    }
    if (r.memory_used_bytes) {
      memory_sum += *r.memory_used_bytes;
      ++memory_count;
      summary.memory_used_peak_bytes =
          std::max(summary.memory_used_peak_bytes.value_or(*r.memory_used_bytes), *r.memory_used_bytes);
    }
    if (r.memory_total_bytes) summary.memory_total_bytes = *r.memory_total_bytes;
  }
  if (utilization_count > 0) summary.utilization_mean = utilization_sum / utilization_count;
  if (memory_count > 0) summary.memory_used_mean_bytes = memory_sum / memory_count;
  return summary;
}

GpuSampler::GpuSampler(const CurlApi& curl, std::string metrics_url, std::string api_key, double interval_seconds)
    : curl_(curl), url_(std::move(metrics_url)), api_key_(std::move(api_key)), interval_seconds_(interval_seconds) {
  thread_ = std::thread([this] { run(); });
}

GpuSampler::~GpuSampler() { stop(); }

GpuSummary GpuSampler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  return summarize_gpu(readings_, samples_);
}

void GpuSampler::run() {
  const auto interval = std::chrono::duration<double>(interval_seconds_);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const HttpResponse response = http_get(curl_, url_, api_key_, std::max(1.0, interval_seconds_ * 4));
    lock.lock();
    if (response.status == 200) {
      ++samples_;
      readings_.push_back(gpu_reading(parse_prometheus_text(response.body)));
    }
    wake_.wait_for(lock, interval, [this] { return stopping_; });
  }
}

}  // namespace qinfer::loadgen
