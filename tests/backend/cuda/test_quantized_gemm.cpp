// The quantized GEMM (17-64 rows; int4 from AWQ and GPTQ checkpoints, block-scaled FP8) against a float64 reference
// over the format's exactly dequantized weights: every launch shape, with and without k splits, partial 16-row tiles
// and partial 128-k tiles, outputs poisoned beforehand; the fp32 partial sums of a split launch to 1e-5; its SwiGLU
// epilogue bit for bit against the unfused linear + SwiGLU kernel; row results that do not depend on the batch.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/quantized_gemm.h"
#include "backend/cuda/kernels/swiglu.h"
#include "gpu_test_util.h"
#include "quantized_linear_case.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs, float64 references, relative_error, quantized cases

std::string describe(const std::string& format, QuantizedGemmShape shape, int rows, int n, int k) {
  return format + ", " + std::to_string(shape.warps) + " warps x " + std::to_string(shape.tiles_per_block) +
         " tiles, " + std::to_string(rows) + " x " + std::to_string(k) + " * " + std::to_string(n) + " x " +
         std::to_string(k);
}

struct Case {
  int rows, n, k;
};

// rows: the smallest the route sends (17), both x-tile counts, partial x tiles, the most (64); n: partial 16-row tiles
// and partial blocks (40, 136, 264); k: partial 128-k tiles (2080, 1056, 96) and the 4B's 2560 / 4096 / 9728.
const Case kCases[] = {{17, 40, 2080}, {24, 1000, 2560}, {32, 136, 1056}, {33, 264, 4096},
                       {47, 64, 9728}, {64, 48, 96},     {64, 520, 2560}};

std::vector<QuantizedGemmShape> shapes_to_test() {
  std::vector<QuantizedGemmShape> shapes;
  for (int warps : {4, 8})
    for (int tiles : {2, 4, 8}) shapes.push_back({warps, tiles});
  return shapes;
}

TEST(QuantizedGemm, MatchesReferenceForEveryShape) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kQuantizedFormats)
    for (const auto [rows, n, k] : kCases) {
      const auto c = make_quantized_case(format, n, k, static_cast<uint32_t>(rows * 1000 + n + k));
      std::mt19937 rng(rows + n);
      const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
      const auto ref = reference_linear(to_double(x), as_double(c->dequantized), rows, n, k);
      DeviceArray<__nv_bfloat16> dx(x);
      for (const QuantizedGemmShape& shape : shapes_to_test()) {
        std::vector<float> poison(std::max<size_t>(1, quantized_gemm_workspace_floats(shape, n, k, rows)), 1e30f);
        DeviceArray<float> workspace(poison);
        DeviceArray<__nv_bfloat16> dy(std::vector<__nv_bfloat16>(static_cast<size_t>(rows) * n, 1e30f));
        launch_quantized_gemm(
            {.x = dx.get(), .weight = c->view(), .y = dy.get(), .num_rows = rows, .workspace = workspace.get()}, shape,
            test_stream());
        EXPECT_LT(relative_error(dy.download(), ref), 1e-2) << describe(format, shape, rows, n, k);
        const int splits = quantized_gemm_splits(shape, k);
        if (splits == 1) continue;
        // The splits' fp32 partial sums add up to the product to fp32 rounding.
        const auto partial = workspace.download();
        std::vector<float> sum(static_cast<size_t>(rows) * n, 0.0f);
        for (int s = 0; s < splits; ++s)
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += partial[static_cast<size_t>(s) * sum.size() + i];
        EXPECT_LT(relative_error(sum, ref), 1e-5) << describe(format, shape, rows, n, k);
      }
    }
}

TEST(QuantizedGemm, RowResultsDoNotDependOnTheBatch) {
  SKIP_WITHOUT_GPU();
  constexpr int kN = 304, kK = 2560;
  for (const char* format : kQuantizedFormats) {
    const auto c = make_quantized_case(format, kN, kK, 5);
    std::mt19937 rng(5);
    const auto x = random_bf16(static_cast<size_t>(kQuantizedGemmMaxRows) * kK, rng);
    DeviceArray<__nv_bfloat16> dx(x);
    const QuantizedGemmShape shape = quantized_gemm_default_shape();
    DeviceArray<float> workspace(
        std::max<size_t>(1, quantized_gemm_workspace_floats(shape, kN, kK, kQuantizedGemmMaxRows)));
    const auto run = [&](int rows) {
      DeviceArray<__nv_bfloat16> y(static_cast<size_t>(rows) * kN);
      launch_quantized_gemm(
          {.x = dx.get(), .weight = c->view(), .y = y.get(), .num_rows = rows, .workspace = workspace.get()}, shape,
          test_stream());
      return y.download();
    };
    const auto all = run(kQuantizedGemmMaxRows), seventeen = run(17);
    for (size_t i = 0; i < seventeen.size(); ++i)
      ASSERT_EQ(to_float(seventeen[i]), to_float(all[i])) << format << " element " << i;
  }
}

// The SwiGLU epilogue (direct with one split of 8 tiles of k = 1056, after k splits otherwise) against float64 and bit
// for bit against the unfused linear + SwiGLU kernel with the same shape.
TEST(QuantizedGemm, SwigluMatchesReferenceAndUnfusedPath) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kQuantizedFormats)
    for (const auto [rows, inter, k] : {Case{64, 1216, 2560}, Case{20, 24, 96}, Case{40, 104, 1056}})
      for (const int tiles : {4, 8}) {
        const auto c = make_quantized_case(format, 2 * inter, k, static_cast<uint32_t>(rows * 31 + inter));
        std::mt19937 rng(rows * 31 + inter);
        const auto x = random_bf16(static_cast<size_t>(rows) * k, rng, 2.0f);
        const auto ref = reference_swiglu(reference_linear(to_double(x), as_double(c->dequantized), rows, 2 * inter, k),
                                          rows, inter);
        const QuantizedGemmShape shape{4, tiles};
        DeviceArray<float> workspace(std::max<size_t>(1, quantized_gemm_workspace_floats(shape, 2 * inter, k, rows)));
        DeviceArray<__nv_bfloat16> dx(x), gate_up(static_cast<size_t>(rows) * 2 * inter),
            unfused(static_cast<size_t>(rows) * inter), fused(static_cast<size_t>(rows) * inter);
        launch_quantized_gemm(
            {.x = dx.get(), .weight = c->view(), .y = gate_up.get(), .num_rows = rows, .workspace = workspace.get()},
            shape, test_stream());
        launch_swiglu({gate_up.get(), unfused.get(), rows, inter}, test_stream());
        launch_quantized_gemm({.x = dx.get(),
                               .weight = c->view(),
                               .y = fused.get(),
                               .num_rows = rows,
                               .swiglu = true,
                               .workspace = workspace.get()},
                              shape, test_stream());
        const auto got = fused.download(), want = unfused.download();
        EXPECT_LT(relative_error(got, ref), 1e-2) << describe(format, shape, rows, 2 * inter, k);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(to_float(got[i]), to_float(want[i]))
              << describe(format, shape, rows, 2 * inter, k) << " element " << i;
      }
}

TEST(QuantizedGemm, RefusesAnUnknownShapeAndSplitsWithoutWorkspace) {
  SKIP_WITHOUT_GPU();
  const auto c = make_quantized_case("awq", 16, 1024, 1);
  DeviceArray<__nv_bfloat16> x(20 * 1024), y(20 * 16);
  const QuantizedGemmParams p{.x = x.get(), .weight = c->view(), .y = y.get(), .num_rows = 20};
  EXPECT_THROW(launch_quantized_gemm(p, {6, 4}, test_stream()), Error);
  EXPECT_THROW(launch_quantized_gemm(p, {4, 3}, test_stream()), Error);
  EXPECT_THROW(launch_quantized_gemm(p, {4, 4}, test_stream()), Error);  // 8 tiles: 2 splits, no workspace
}

}  // namespace
}  // namespace qinfer::cuda
