#include "server/gpu_probe.h"

#include <dlfcn.h>

#include "util/logging.h"

namespace qinfer::server {
namespace {

// The few NVML C ABI types we use (nvml.h, stable since NVML 5); declared here so no CUDA header is needed to build.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

}  // namespace

struct GpuProbe::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*device_count)(unsigned int*);
  NvmlReturn (*device_handle)(unsigned int, NvmlDevice*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
};

std::unique_ptr<GpuProbe> GpuProbe::open() {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) return nullptr;
  auto api = std::make_unique<Api>();
  auto load = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    return function != nullptr;
  };
  unsigned int count = 0;
  const bool loaded =
      load(api->init, "nvmlInit_v2") && load(api->shutdown, "nvmlShutdown") &&
      load(api->device_count, "nvmlDeviceGetCount_v2") && load(api->device_handle, "nvmlDeviceGetHandleByIndex_v2") &&
      load(api->utilization, "nvmlDeviceGetUtilizationRates") && load(api->memory, "nvmlDeviceGetMemoryInfo");
  if (!loaded || api->init() != kNvmlSuccess) {
    dlclose(library);
    return nullptr;
  }
  if (api->device_count(&count) != kNvmlSuccess || count == 0) {
    api->shutdown();
    dlclose(library);
    return nullptr;
  }
  spdlog::info("metrics: GPU utilisation and memory of {} GPU(s) through NVML", count);
  return std::unique_ptr<GpuProbe>(new GpuProbe(library, std::move(api), count));
}

GpuProbe::GpuProbe(void* library, std::unique_ptr<Api> api, unsigned device_count)
    : library_(library), api_(std::move(api)), device_count_(device_count) {}

GpuProbe::~GpuProbe() {
  api_->shutdown();
  dlclose(library_);
}

std::vector<GpuReading> GpuProbe::read() {
  std::lock_guard lock(mutex_);
  std::vector<GpuReading> readings;
  for (unsigned int i = 0; i < device_count_; ++i) {
    NvmlDevice device = nullptr;
    NvmlUtilization utilization{};
    NvmlMemory memory{};
    if (api_->device_handle(i, &device) != kNvmlSuccess || api_->utilization(device, &utilization) != kNvmlSuccess ||
        api_->memory(device, &memory) != kNvmlSuccess)
      continue;
    readings.push_back({static_cast<int>(i), utilization.gpu / 100.0, memory.used, memory.total});
  }
  return readings;
}

}  // namespace qinfer::server
