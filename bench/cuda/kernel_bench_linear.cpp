// Kernel bench: the copy ceiling, decode linears (GEMV, tensor-core GEMV, cuBLASLt) and prefill GEMMs.
#include "kernel_bench.h"

namespace qinfer::cuda::bench {

void Bench::copy_ceiling() {
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer a(bytes, "bench"), b(bytes, "bench");
  fill_random_bf16(a.as<__nv_bfloat16>(), bytes / 2, 1, 1.0f, stream_);
  const double t = time_per_call(
      [&](int) { CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream_)); }, 5,
      stream_);
  record("device copy", "2 GiB", t, 2.0 * static_cast<double>(bytes), true);
}

void Bench::linear(const char* name, int n, int k, const std::vector<int>& rows_list, bool sweep_mma, bool swiglu) {
  const size_t weight_bytes = static_cast<size_t>(n) * k * 2;
  const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / weight_bytes));
  std::vector<DeviceBuffer> weights;
  for (int c = 0; c < copies; ++c) {
    weights.emplace_back(weight_bytes, "bench weights");
    fill_random_bf16(weights.back().as<__nv_bfloat16>(), weight_bytes / 2, 100 + c, 0.02f, stream_);
  }
  DeviceBuffer x(static_cast<size_t>(256) * k * 2, "bench x"), y(static_cast<size_t>(256) * n * 4, "bench y");
  fill_random_bf16(x.as<__nv_bfloat16>(), static_cast<size_t>(256) * k, 7, 1.0f, stream_);
  // With swiglu: the SwiGLU kernel's output after cuBLASLt, [rows, n / 2] bf16.
  DeviceBuffer activation(swiglu ? static_cast<size_t>(256) * n : 1, "bench activation");
  for (int rows : rows_list) {
    const std::string shape = std::to_string(rows) + "x" + std::to_string(k) + " * " + std::to_string(n) + "x" +
                              std::to_string(k) + " (" + name + ")";
    const double bytes = static_cast<double>(weight_bytes) + 2.0 * rows * (k + n);
    const auto params = [&](int i) {
      GemvParams p{x.as<__nv_bfloat16>(),
                   weights[static_cast<size_t>(i % copies)].as<__nv_bfloat16>(),
                   y.data(),
                   false,
                   rows,
                   n,
                   k};
      p.swiglu = swiglu;
      return p;
    };
    const std::string suffix = swiglu ? " + swiglu" : "";
    if (rows <= kGemvMaxRows) {
      const double t = time_per_call([&](int i) { launch_gemv(params(i), kernel_stream()); }, 20 * copies, stream_);
      record("gemv" + suffix, shape, t, bytes, true);
    }
    if (gemv_mma_supports(params(0))) {
      const auto time_mma = [&](GemvMmaShape launch) {
        return time_per_call([&](int i) { launch_gemv_mma(params(i), launch, kernel_stream()); }, 20 * copies, stream_);
      };
      if (sweep_mma) {
        for (const GemvMmaShape launch : gemv_mma_shapes())
          record("mma " + std::to_string(launch.warps) + "w " + std::to_string(launch.groups_in_flight) + "f" + suffix,
                 shape, time_mma(launch), bytes, true);
      } else {
        record("gemv mma" + suffix, shape, time_mma(gemv_mma_default_shape(n)), bytes, true);
      }
    }
    const double t = time_per_call(
        [&](int i) {
          gemm_.matmul(x.as<__nv_bfloat16>(), weights[static_cast<size_t>(i % copies)].as<__nv_bfloat16>(), y.data(),
                       false, rows, n, k, stream_);
          if (swiglu)
            launch_swiglu({y.as<__nv_bfloat16>(), activation.as<__nv_bfloat16>(), rows, n / 2}, kernel_stream());
        },
        20 * copies, stream_);
    record("cublasLt" + suffix, shape, t, bytes, true);
  }
}

void Bench::prefill_gemm(const char* name, int m, int n, int k) {
  DeviceBuffer w(static_cast<size_t>(n) * k * 2, "bench"), x(static_cast<size_t>(m) * k * 2, "bench"),
      y(static_cast<size_t>(m) * n * 2, "bench");
  fill_random_bf16(w.as<__nv_bfloat16>(), static_cast<size_t>(n) * k, 3, 0.02f, stream_);
  fill_random_bf16(x.as<__nv_bfloat16>(), static_cast<size_t>(m) * k, 4, 1.0f, stream_);
  const std::string shape = std::to_string(m) + "x" + std::to_string(k) + " * " + std::to_string(n) + "x" +
                            std::to_string(k) + " (" + name + ")";
  const auto time_gemm = [&] {
    return time_per_call(
        [&](int) { gemm_.matmul(x.as<__nv_bfloat16>(), w.as<__nv_bfloat16>(), y.data(), false, m, n, k, stream_); }, 10,
        stream_);
  };
  record("cublasLt", shape, time_gemm(), 2.0 * m * n * k, false);
  const CublasLtGemm::TuneResult tuned =
      gemm_.tune(x.as<__nv_bfloat16>(), w.as<__nv_bfloat16>(), y.data(), false, m, n, k, stream_);
  std::printf("  tuning: candidate %d of %d, %.1f -> %.1f us in the sweep\n", tuned.chosen, tuned.candidates,
              tuned.first_choice_seconds * 1e6, tuned.chosen_seconds * 1e6);
  record("cublasLt tuned", shape, time_gemm(), 2.0 * m * n * k, false);
}

}  // namespace qinfer::cuda::bench
