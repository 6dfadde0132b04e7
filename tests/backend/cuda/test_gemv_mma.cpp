// The tensor-core GEMV against a float64 reference (every launch shape, 1-16 rows, edges of the 16-row tiles and of
// k's 32-element groups, outputs poisoned beforehand), its SwiGLU epilogue bit for bit against its own linear + the
// SwiGLU kernel, and row independence: a row of x gets the same bits whatever the batch around it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/swiglu.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs, float64 references, relative_error

constexpr double kBf16Tolerance = 1e-2;

std::string describe(GemvMmaShape shape, int rows, int n, int k) {
  return std::to_string(shape.warps) + " warps x " + std::to_string(shape.groups_in_flight) + " groups, " +
         std::to_string(rows) + " x " + std::to_string(k) + " * " + std::to_string(n) + " x " + std::to_string(k);
}

struct Case {
  int rows, n, k;
};

// n: one tile, partial tiles (40, 1000), many tiles; k: one group, a group count that does not divide by the warps
// (2080 = 65 groups), the model's 2560 / 4096 / 9728.
const Case kCases[] = {{1, 16, 32},   {1, 1000, 2560}, {2, 40, 2080}, {3, 257, 4096}, {5, 64, 9728},
                       {8, 33, 2560}, {9, 130, 1056},  {12, 48, 96},  {16, 77, 2560}};

TEST(GemvMma, MatchesReferenceForEveryShape) {
  SKIP_WITHOUT_GPU();
  for (const auto [rows, n, k] : kCases) {
    std::mt19937 rng(rows * 1000 + n + k);
    const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
    const auto w = random_bf16(static_cast<size_t>(n) * k, rng, 1.0f / std::sqrt(static_cast<float>(k)));
    const auto ref = reference_linear(to_double(x), to_double(w), rows, n, k);
    DeviceArray<__nv_bfloat16> dx(x), dw(w);
    for (const GemvMmaShape shape : gemv_mma_shapes()) {
      DeviceArray<__nv_bfloat16> dy(static_cast<size_t>(rows) * n);
      DeviceArray<float> dy32(static_cast<size_t>(rows) * n);
      launch_gemv_mma({dx.get(), dw.get(), dy.get(), false, rows, n, k}, shape, test_stream());
      launch_gemv_mma({dx.get(), dw.get(), dy32.get(), true, rows, n, k}, shape, test_stream());
      EXPECT_LT(relative_error(dy.download(), ref), kBf16Tolerance) << describe(shape, rows, n, k);
      EXPECT_LT(relative_error(dy32.download(), ref), 1e-5) << describe(shape, rows, n, k);
    }
  }
}

TEST(GemvMma, RowResultsDoNotDependOnTheBatch) {
  SKIP_WITHOUT_GPU();
  constexpr int kRows = 16, kN = 300, kK = 2560;
  std::mt19937 rng(5);
  const auto x = random_bf16(static_cast<size_t>(kRows) * kK, rng);
  const auto w = random_bf16(static_cast<size_t>(kN) * kK, rng, 1.0f / std::sqrt(static_cast<float>(kK)));
  DeviceArray<__nv_bfloat16> dx(x), dw(w);
  for (const GemvMmaShape shape : gemv_mma_shapes()) {
    DeviceArray<float> all(static_cast<size_t>(kRows) * kN), first(kN), first_three(3 * kN);
    launch_gemv_mma({dx.get(), dw.get(), all.get(), true, kRows, kN, kK}, shape, test_stream());
    launch_gemv_mma({dx.get(), dw.get(), first.get(), true, 1, kN, kK}, shape, test_stream());
    launch_gemv_mma({dx.get(), dw.get(), first_three.get(), true, 3, kN, kK}, shape, test_stream());
    const auto batch = all.download(), one = first.download(), three = first_three.download();
    for (int o = 0; o < kN; ++o) {
      ASSERT_EQ(one[o], batch[o]) << describe(shape, 1, kN, kK) << " output " << o;
      for (int r = 0; r < 3; ++r)
        ASSERT_EQ(three[r * kN + o], batch[r * kN + o])
            << describe(shape, 3, kN, kK) << " row " << r << " output " << o;
    }
  }
}

// The SwiGLU epilogue rounds gate and up to bf16 before the activation, as the linear + SwiGLU kernel pair does from
// the same sums, so the two agree bit for bit; both are also checked against float64. (The SwiGLU kernel takes
// multiples of 8 for the intermediate size.)
TEST(GemvMma, SwigluMatchesReferenceAndUnfusedPath) {
  SKIP_WITHOUT_GPU();
  for (const auto [rows, inter, k] : {Case{1, 9728, 2560}, Case{2, 24, 96}, Case{11, 104, 1056}}) {
    std::mt19937 rng(rows * 31 + inter);
    const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
    const auto w = random_bf16(static_cast<size_t>(2 * inter) * k, rng, 2.0f / std::sqrt(static_cast<float>(k)));
    const auto ref = reference_swiglu(reference_linear(to_double(x), to_double(w), rows, 2 * inter, k), rows, inter);
    DeviceArray<__nv_bfloat16> dx(x), dw(w);
    for (const GemvMmaShape shape : gemv_mma_shapes()) {
      DeviceArray<__nv_bfloat16> gate_up(static_cast<size_t>(rows) * 2 * inter),
          unfused(static_cast<size_t>(rows) * inter), fused(static_cast<size_t>(rows) * inter);
      GemvParams linear{dx.get(), dw.get(), gate_up.get(), false, rows, 2 * inter, k};
      launch_gemv_mma(linear, shape, test_stream());
      launch_swiglu({gate_up.get(), unfused.get(), rows, inter}, test_stream());
      linear.y = fused.get();
      linear.swiglu = true;
      launch_gemv_mma(linear, shape, test_stream());
      const auto got = fused.download(), want = unfused.download();
      EXPECT_LT(relative_error(got, ref), kBf16Tolerance) << describe(shape, rows, 2 * inter, k);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(to_float(got[i]), to_float(want[i])) << describe(shape, rows, 2 * inter, k) << " element " << i;
    }
  }
}

TEST(GemvMma, RejectsUnsupportedShapes) {
  SKIP_WITHOUT_GPU();
  DeviceArray<__nv_bfloat16> x(64), w(64), y(64);
  EXPECT_FALSE(gemv_mma_supports({x.get(), w.get(), y.get(), false, 1, 2, 40}));
  EXPECT_FALSE(gemv_mma_supports({x.get(), w.get(), y.get(), false, 17, 2, 32}));
  EXPECT_TRUE(gemv_mma_supports({x.get(), w.get(), y.get(), false, 16, 2, 32}));
  EXPECT_THROW(launch_gemv_mma({x.get(), w.get(), y.get(), false, 1, 2, 32}, {6, 4}, test_stream()), Error);
}

}  // namespace
}  // namespace qinfer::cuda
