// Kernel bench: decode linears over quantized weights (the quantized tensor-core GEMV at 1..16 rows, every warp count;
// the quantized GEMM at 17..256 rows in chunks of 64, every launch shape) against the route beyond (dequantize to bf16,
// then cuBLASLt). Bandwidth is counted in the bytes the kernel must read: packed codes, scales, x, y.
#include <bit>

#include "backend/cuda/kernels/quantized_gemm.h"
#include "backend/cuda/kernels/quantized_gemv.h"
#include "kernel_bench.h"
#include "util/half.h"

namespace qinfer::cuda::bench {

namespace {

// A packed weight with arbitrary codes and valid metadata (int4: scale 1/64, zero 8; fp8: scale 1/256).
struct PackedCopy {
  DeviceBuffer words, scales;
};

// `shape` gives the format and sizes (its vectors stay empty).
PackedCopy make_packed(const PackedQuantizedLinear& shape, uint64_t seed, cudaStream_t stream) {
  const QuantizedFormat format = shape.format;
  const int n = shape.n;
  PackedCopy copy;
  const size_t words = static_cast<size_t>(n) * shape.row_words();
  copy.words = DeviceBuffer(words * 4, "bench packed weight");
  fill_random_f32(copy.words.as<float>(), words, seed, 1.0f, stream);  // any bits are codes
  const uint32_t meta = format == QuantizedFormat::kInt4
                            ? (0x2400u | static_cast<uint32_t>(float_to_bf16(136.0f)) << 16)
                            : std::bit_cast<uint32_t>(1.0f / 256);
  copy.scales = device_copy(std::vector<uint32_t>(static_cast<size_t>(n) * shape.groups_per_row(), meta));
  return copy;
}

}  // namespace

void Bench::quantized_linear(const char* name, QuantizedFormat format, int n, int k, const std::vector<int>& rows_list,
                             bool sweep_shapes, bool swiglu) {
  constexpr int group = 128;  // AWQ's usual group and Qwen FP8's block
  PackedQuantizedLinear shape;
  shape.format = format;
  shape.n = n;
  shape.k = k;
  shape.group_size = group;
  const size_t packed_bytes =
      static_cast<size_t>(n) * shape.row_words() * 4 + static_cast<size_t>(n) * shape.groups_per_row() * 4;
  const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / packed_bytes));
  std::vector<PackedCopy> weights;
  for (int c = 0; c < copies; ++c) weights.push_back(make_packed(shape, 200 + c, stream_));
  DeviceBuffer x(static_cast<size_t>(256) * k * 2, "bench x"), y(static_cast<size_t>(256) * n * 4, "bench y"),
      dequantized(static_cast<size_t>(n) * k * 2, "bench dequantized"),
      partials(quantized_gemm_workspace_floats({4, 2}, n, k, kQuantizedGemmMaxRows) * 4 + 4, "bench partial sums");
  fill_random_bf16(x.as<__nv_bfloat16>(), static_cast<size_t>(256) * k, 7, 1.0f, stream_);
  const char* format_name = format == QuantizedFormat::kInt4 ? "int4" : "fp8";
  const auto view = [&](int i) {
    const PackedCopy& w = weights[static_cast<size_t>(i % copies)];
    return QuantizedWeightView{.format = format,
                               .weight = w.words.as<uint32_t>(),
                               .scales = w.scales.as<uint32_t>(),
                               .group_size = group,
                               .n = n,
                               .k = k};
  };
  for (int rows : rows_list) {
    const std::string shape_text = std::to_string(rows) + "x" + std::to_string(k) + " * " + std::to_string(n) + "x" +
                                   std::to_string(k) + " (" + name + ", " + format_name + ")";
    const double bytes = static_cast<double>(packed_bytes) + 2.0 * rows * (k + n);
    const std::string suffix = swiglu ? " + swiglu" : "";
    if (rows <= kQuantizedGemvMaxRows) {
      const auto time_shape = [&](QuantizedGemvShape launch) {
        return time_per_call(
            [&](int i) {
              launch_quantized_gemv(
                  {.x = x.as<__nv_bfloat16>(), .weight = view(i), .y = y.data(), .num_rows = rows, .swiglu = swiglu},
                  launch, kernel_stream());
            },
            20 * copies, stream_);
      };
      if (sweep_shapes) {
        for (const QuantizedGemvShape launch : quantized_gemv_shapes())
          record("quantized " + std::to_string(launch.warps) + "w " + std::to_string(launch.tiles_in_flight) + "t" +
                     suffix,
                 shape_text, time_shape(launch), bytes, true);
      } else {
        record("quantized gemv" + suffix, shape_text, time_shape(quantized_gemv_default_shape(view(0))), bytes, true);
      }
    }
    if (rows > kQuantizedGemvMaxRows) {
      const auto time_shape = [&](QuantizedGemmShape launch) {
        return time_per_call(
            [&](int i) {
              for (int first = 0; first < rows; first += kQuantizedGemmMaxRows)
                launch_quantized_gemm({.x = x.as<__nv_bfloat16>() + static_cast<size_t>(first) * k,
                                       .weight = view(i),
                                       .y = y.as<__nv_bfloat16>() + static_cast<size_t>(first) * n,
                                       .num_rows = std::min(kQuantizedGemmMaxRows, rows - first),
                                       .swiglu = swiglu,
                                       .workspace = partials.as<float>()},
                                      launch, kernel_stream());
            },
            20 * copies, stream_);
      };
      const QuantizedGemmShape chosen = quantized_gemm_default_shape();
      const auto label = [&](QuantizedGemmShape launch) {
        return "quantized gemm " + std::to_string(launch.warps) + "w " + std::to_string(launch.tiles_per_block) + "t" +
               suffix;
      };
      record(label(chosen) + " (default)", shape_text, time_shape(chosen), bytes, true);
      if (sweep_shapes && rows <= kQuantizedGemmMaxRows)
        for (const int warps : {4, 8})
          for (const int tiles : {2, 4, 8})
            if (warps != chosen.warps || tiles != chosen.tiles_per_block)
              record(label({warps, tiles}), shape_text, time_shape({warps, tiles}), bytes, true);
    }
    const double t = time_per_call(
        [&](int i) {
          launch_dequantize_weight(view(i), dequantized.as<__nv_bfloat16>(), kernel_stream());
          gemm_.matmul(x.as<__nv_bfloat16>(), dequantized.as<__nv_bfloat16>(), y.data(), false, rows, n, k, stream_);
        },
        20 * copies, stream_);
    record("dequantize + cublasLt", shape_text, t, bytes, true);
  }
}

}  // namespace qinfer::cuda::bench
