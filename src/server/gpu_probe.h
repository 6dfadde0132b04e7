// GPU utilisation and memory for /metrics, read through NVML loaded at run time (dlopen of libnvidia-ml.so.1), so the
// binary has no link-time dependency on the driver and simply reports nothing on machines without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace qinfer::server {

struct GpuReading {
  int index = 0;
  double utilization_ratio = 0;  // fraction of the last sample period a kernel ran
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
};

class GpuProbe {
 public:
  // Null when NVML cannot be loaded or initialised, or no GPU is visible.
  static std::unique_ptr<GpuProbe> open();
  ~GpuProbe();
  GpuProbe(const GpuProbe&) = delete;
  GpuProbe& operator=(const GpuProbe&) = delete;

  // One reading per GPU; devices NVML fails to answer for are left out. Thread-safe.
  std::vector<GpuReading> read();

  struct Api;

 private:
  GpuProbe(void* library, std::unique_ptr<Api> api, unsigned device_count);
  void* library_;
  std::unique_ptr<Api> api_;
  unsigned device_count_;
  std::mutex mutex_;
};

}  // namespace qinfer::server
