// The quantized tensor-core GEMV (int4 from AWQ and GPTQ checkpoints, block-scaled FP8) against a float64 reference
// over the format's exactly dequantized weights, for every warp count, 1-16 rows, partial 16-row blocks and partial
// 128-k tiles, outputs poisoned beforehand; its SwiGLU epilogue; row independence; and the dequantize kernel the GEMM
// route uses, bit for bit against the host's bf16 rounding of the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/quantized_gemv.h"
#include "backend/cuda/kernels/swiglu.h"
#include "gpu_test_util.h"
#include "quantized_linear_case.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs, float64 references, relative_error

std::string describe(const std::string& format, QuantizedGemvShape shape, int rows, int n, int k) {
  return format + ", " + std::to_string(shape.warps) + " warps x " + std::to_string(shape.tiles_in_flight) +
         " tiles, " + std::to_string(rows) + " x " + std::to_string(k) + " * " + std::to_string(n) + " x " +
         std::to_string(k);
}

struct Case {
  int rows, n, k;
};

// n: one block, partial blocks (40, 136), many; k: one tile, partial tiles (2080, 1056, 96), the 4B's 2560 / 4096 /
// 9728.
const Case kCases[] = {{1, 16, 128},  {1, 1000, 2560}, {2, 40, 2080}, {3, 264, 4096}, {5, 64, 9728},
                       {8, 40, 2560}, {9, 136, 1056},  {12, 48, 96},  {16, 80, 2560}};

TEST(QuantizedGemv, MatchesReferenceForEveryShape) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kQuantizedFormats)
    for (const auto [rows, n, k] : kCases) {
      const auto c = make_quantized_case(format, n, k, static_cast<uint32_t>(rows * 1000 + n + k));
      std::mt19937 rng(rows + n);
      const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
      const auto ref = reference_linear(to_double(x), as_double(c->dequantized), rows, n, k);
      DeviceArray<__nv_bfloat16> dx(x);
      for (const QuantizedGemvShape shape : quantized_gemv_shapes()) {
        DeviceArray<__nv_bfloat16> dy(static_cast<size_t>(rows) * n);
        DeviceArray<float> dy32(static_cast<size_t>(rows) * n);
        launch_quantized_gemv({.x = dx.get(), .weight = c->view(), .y = dy.get(), .num_rows = rows}, shape,
                              test_stream());
        launch_quantized_gemv({.x = dx.get(), .weight = c->view(), .y = dy32.get(), .y_fp32 = true, .num_rows = rows},
                              shape, test_stream());
        EXPECT_LT(relative_error(dy.download(), ref), 1e-2) << describe(format, shape, rows, n, k);
        EXPECT_LT(relative_error(dy32.download(), ref), 1e-5) << describe(format, shape, rows, n, k);
      }
    }
}

TEST(QuantizedGemv, RowResultsDoNotDependOnTheBatch) {
  SKIP_WITHOUT_GPU();
  constexpr int kRows = 16, kN = 304, kK = 2560;
  for (const char* format : kQuantizedFormats) {
    const auto c = make_quantized_case(format, kN, kK, 5);
    std::mt19937 rng(5);
    const auto x = random_bf16(static_cast<size_t>(kRows) * kK, rng);
    DeviceArray<__nv_bfloat16> dx(x);
    DeviceArray<float> all(static_cast<size_t>(kRows) * kN), first(kN), first_three(3 * kN);
    const auto run = [&](DeviceArray<float>& y, int rows) {
      launch_quantized_gemv({.x = dx.get(), .weight = c->view(), .y = y.get(), .y_fp32 = true, .num_rows = rows},
                            test_stream());
    };
    run(all, kRows);
    run(first, 1);
    run(first_three, 3);
    const auto batch = all.download(), one = first.download(), three = first_three.download();
    for (int o = 0; o < kN; ++o) {
      ASSERT_EQ(one[o], batch[o]) << format << " output " << o;
      for (int r = 0; r < 3; ++r) ASSERT_EQ(three[r * kN + o], batch[r * kN + o]) << format << " row " << r;
    }
  }
}

// The SwiGLU epilogue against float64 and bit for bit against the unfused linear + SwiGLU kernel.
TEST(QuantizedGemv, SwigluMatchesReferenceAndUnfusedPath) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kQuantizedFormats)
    for (const auto [rows, inter, k] : {Case{1, 9728, 2560}, Case{2, 24, 96}, Case{11, 104, 1056}}) {
      const auto c = make_quantized_case(format, 2 * inter, k, static_cast<uint32_t>(rows * 31 + inter));
      std::mt19937 rng(rows * 31 + inter);
      const auto x = random_bf16(static_cast<size_t>(rows) * k, rng, 2.0f);
      const auto ref =
          reference_swiglu(reference_linear(to_double(x), as_double(c->dequantized), rows, 2 * inter, k), rows, inter);
      DeviceArray<__nv_bfloat16> dx(x), gate_up(static_cast<size_t>(rows) * 2 * inter),
          unfused(static_cast<size_t>(rows) * inter), fused(static_cast<size_t>(rows) * inter);
      launch_quantized_gemv({.x = dx.get(), .weight = c->view(), .y = gate_up.get(), .num_rows = rows}, test_stream());
      launch_swiglu({gate_up.get(), unfused.get(), rows, inter}, test_stream());
      launch_quantized_gemv({.x = dx.get(), .weight = c->view(), .y = fused.get(), .num_rows = rows, .swiglu = true},
                            test_stream());
      const auto got = fused.download(), want = unfused.download();
      EXPECT_LT(relative_error(got, ref), 1e-2)
          << describe(format, quantized_gemv_default_shape(c->view()), rows, 2 * inter, k);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(to_float(got[i]), to_float(want[i]))
            << describe(format, quantized_gemv_default_shape(c->view()), rows, 2 * inter, k) << " element " << i;
    }
}

// Each dequantized element is the format's fp32 value rounded once to bf16, as the host rounds it.
TEST(DequantizeWeight, EqualsTheFormatsValuesRoundedToBf16) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kQuantizedFormats)
    for (const auto [rows, n, k] : {Case{0, 40, 2080}, Case{0, 264, 2560}, Case{0, 16, 96}}) {
      const auto c = make_quantized_case(format, n, k, static_cast<uint32_t>(n + k));
      DeviceArray<__nv_bfloat16> out(static_cast<size_t>(n) * k);
      launch_dequantize_weight(c->view(), out.get(), test_stream());
      const auto got = out.download();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(static_cast<__nv_bfloat16_raw>(got[i]).x, float_to_bf16(c->dequantized[i]))
            << format << " " << n << " x " << k << " element " << i;
    }
}

TEST(QuantizedGemv, RefusesAnUnknownLaunchShape) {
  SKIP_WITHOUT_GPU();
  const auto c = make_quantized_case("awq", 16, 128, 1);
  DeviceArray<__nv_bfloat16> x(128), y(16);
  EXPECT_THROW(
      launch_quantized_gemv({.x = x.get(), .weight = c->view(), .y = y.get(), .num_rows = 1}, {6, 3}, test_stream()),
      Error);
}

}  // namespace
}  // namespace qinfer::cuda
