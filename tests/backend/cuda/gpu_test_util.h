// Helpers for GPU tests: skip without a GPU, device arrays, random bf16 data, error norms.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_capabilities.h"
#include "util/half.h"

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    const std::string gpu_reason = ::qinfer::cuda_unavailable_reason();       \
    if (!gpu_reason.empty()) GTEST_SKIP() << "no usable GPU: " << gpu_reason; \
  } while (0)

namespace qinfer::cuda {

// The test process's device, queried once (tests drive one device, as the backend does).
inline const DeviceCapabilities& test_device() {
  static const DeviceCapabilities device = query_device_capabilities();
  return device;
}

// The test device as a planner with `num_sms` SMs would see it (plans for other GPU sizes).
inline DeviceCapabilities test_device_with_sms(int num_sms) {
  DeviceCapabilities device = test_device();
  device.num_sms = num_sms;
  return device;
}

// Kernels enqueued on `stream` (the default stream when null) of the test device.
inline KernelStream test_stream(cudaStream_t stream = nullptr) { return {stream, test_device()}; }

}  // namespace qinfer::cuda

namespace qinfer::cuda::testing {

// Device copy of a host vector; download() reads it back.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()), buffer_(host.size() * sizeof(T), "test") {
    CUDA_CHECK(cudaMemcpy(buffer_.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Filled with the byte 0xFF: NaN for floats and bf16, so unwritten outputs fail every comparison.
  explicit DeviceArray(size_t size) : size_(size), buffer_(size * sizeof(T), "test") {
    CUDA_CHECK(cudaMemset(buffer_.data(), 0xFF, size * sizeof(T)));
  }
  T* get() const { return buffer_.as<T>(); }
  size_t size() const { return size_; }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(host.data(), buffer_.data(), size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t size_;
  DeviceBuffer buffer_;
};

inline std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng, float scale = 1.0f, float offset = 0.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) {
    __nv_bfloat16_raw raw;
    raw.x = float_to_bf16(dist(rng) + offset);
    x = raw;
  }
  return v;
}

inline float to_float(__nv_bfloat16 x) { return bf16_to_float(static_cast<__nv_bfloat16_raw>(x).x); }
inline float to_float(float x) { return x; }

inline std::vector<double> to_double(const std::vector<__nv_bfloat16>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
  return out;
}

// ||out - ref|| / ||ref||; infinity when any output is not finite (unwritten, poisoned, NaN).
template <typename T>
double relative_error(const std::vector<T>& out, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double o = to_float(out[i]);
    if (!std::isfinite(o)) return INFINITY;
    diff += (o - ref[i]) * (o - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Relative error of one row of logits and whether the GPU's argmax agrees where the reference has a clear margin.
struct RowComparison {
  double relative_error;
  bool argmax_agrees;
};

inline RowComparison compare_row(std::span<const float> gpu, std::span<const float> cpu, float clear_margin) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!std::isfinite(gpu[i])) return {INFINITY, false};
    diff += (gpu[i] - cpu[i]) * static_cast<double>(gpu[i] - cpu[i]);
    norm += cpu[i] * static_cast<double>(cpu[i]);
  }
  std::vector<size_t> order(cpu.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 2, order.end(), [&](size_t a, size_t b) { return cpu[a] > cpu[b]; });
  const bool clear = cpu[order[0]] - cpu[order[1]] > clear_margin;
  const size_t gpu_argmax = static_cast<size_t>(std::max_element(gpu.begin(), gpu.end()) - gpu.begin());
  return {std::sqrt(diff / norm), !clear || gpu_argmax == order[0]};
}

// y[m, n] = sum_k x[m, k] * w[n, k] in float64.
inline std::vector<double> reference_linear(const std::vector<double>& x, const std::vector<double>& w, int m, int n,
                                            int k) {
  std::vector<double> y(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r)
    for (int o = 0; o < n; ++o) {
      double sum = 0;
      for (int i = 0; i < k; ++i) sum += x[static_cast<size_t>(r) * k + i] * w[static_cast<size_t>(o) * k + i];
      y[static_cast<size_t>(r) * n + o] = sum;
    }
  return y;
}

// silu(gate) * up per row of gate_up = [rows, gate (inter) | up (inter)], in float64.
inline std::vector<double> reference_swiglu(const std::vector<double>& gate_up, int rows, int inter) {
  std::vector<double> out(static_cast<size_t>(rows) * inter);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < inter; ++i) {
      const double g = gate_up[static_cast<size_t>(r) * 2 * inter + i];
      const double u = gate_up[static_cast<size_t>(r) * 2 * inter + inter + i];
      out[static_cast<size_t>(r) * inter + i] = g / (1 + std::exp(-g)) * u;
    }
  return out;
}

}  // namespace qinfer::cuda::testing
