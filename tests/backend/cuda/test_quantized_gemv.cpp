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
#include "backend/cuda/quantized_weight_layout.h"
#include "gpu_test_util.h"
#include "model/weight_quantizer.h"
#include "util/thread_pool.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs, float64 references, relative_error

template <typename T>
TensorView view_of(const std::vector<T>& v, DType dtype, std::vector<int64_t> shape) {
  TensorView t;
  t.name = "test.weight";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(v.data());
  t.num_bytes = v.size() * sizeof(T);
  return t;
}

// A random weight [n, k] in one checkpoint format ("awq", "awq64", "gptq", "fp8"), its values as the format defines
// them, and its packed copy on the device.
struct QuantizedLinearCase {
  std::vector<uint16_t> dense_bits;
  AwqTensors awq;
  GptqTensors gptq;
  Fp8BlockTensors fp8;
  qinfer::LinearWeight weight;
  std::vector<float> dequantized;  // [n, k]
  PackedQuantizedLinear packed;
  std::unique_ptr<DeviceArray<uint32_t>> words, scales;

  QuantizedWeightView view() const {
    return {packed.format, words->get(), scales->get(), packed.group_size, packed.n, packed.k};
  }
};

int group_for(int k) { return k % 128 == 0 ? 128 : k % 64 == 0 ? 64 : 32; }

std::unique_ptr<QuantizedLinearCase> make_case(const std::string& format, int n, int k, uint32_t seed) {
  auto c = std::make_unique<QuantizedLinearCase>();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  c->dense_bits.resize(static_cast<size_t>(n) * k);
  for (auto& bits : c->dense_bits) bits = float_to_bf16(normal(rng));
  const TensorView dense = view_of(c->dense_bits, DType::kBF16, {n, k});
  const int g = format == "awq64" && k % 64 == 0 ? 64 : group_for(k);
  c->weight.out_features = n;
  c->weight.in_features = k;
  if (format == "awq" || format == "awq64") {
    c->awq = quantize_awq(dense, g, nullptr);
    c->weight.data =
        AwqWeight{view_of(c->awq.qweight, DType::kI32, {k, n / 8}), view_of(c->awq.qzeros, DType::kI32, {k / g, n / 8}),
                  view_of(c->awq.scales, DType::kF16, {k / g, n}), g};
  } else if (format == "gptq") {
    c->gptq = quantize_gptq_symmetric(dense, g, nullptr);
    c->weight.data = GptqWeight{view_of(c->gptq.qweight, DType::kI32, {k / 8, n}),
                                view_of(c->gptq.qzeros, DType::kI32, {k / g, n / 8}),
                                view_of(c->gptq.scales, DType::kF16, {k / g, n}),
                                g,
                                1,
                                true};
  } else {
    c->fp8 = quantize_fp8_block(dense, 128, 128, nullptr);
    c->weight.data =
        Fp8BlockWeight{view_of(c->fp8.weight, DType::kF8E4M3, {n, k}),
                       view_of(c->fp8.scale_inv, DType::kF32, {(n + 127) / 128, (k + 127) / 128}), 128, 128};
  }
  c->dequantized.resize(static_cast<size_t>(n) * k);
  dequantize_linear_rows(c->weight, 0, n, c->dequantized.data());
  ThreadPool pool(2);
  const std::vector<const qinfer::LinearWeight*> parts = {&c->weight};
  c->packed = pack_quantized_linear(parts, pool);
  c->words = std::make_unique<DeviceArray<uint32_t>>(c->packed.weight);
  c->scales = std::make_unique<DeviceArray<uint32_t>>(c->packed.scales);
  return c;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

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
// Groups: 128 where k allows, else 32; "awq64" groups of 64 (k permitting).
const char* const kFormats[] = {"awq", "awq64", "gptq", "fp8"};

TEST(QuantizedGemv, MatchesReferenceForEveryShape) {
  SKIP_WITHOUT_GPU();
  for (const char* format : kFormats)
    for (const auto [rows, n, k] : kCases) {
      const auto c = make_case(format, n, k, static_cast<uint32_t>(rows * 1000 + n + k));
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
  for (const char* format : kFormats) {
    const auto c = make_case(format, kN, kK, 5);
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
  for (const char* format : kFormats)
    for (const auto [rows, inter, k] : {Case{1, 9728, 2560}, Case{2, 24, 96}, Case{11, 104, 1056}}) {
      const auto c = make_case(format, 2 * inter, k, static_cast<uint32_t>(rows * 31 + inter));
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
  for (const char* format : kFormats)
    for (const auto [rows, n, k] : {Case{0, 40, 2080}, Case{0, 264, 2560}, Case{0, 16, 96}}) {
      const auto c = make_case(format, n, k, static_cast<uint32_t>(n + k));
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
  const auto c = make_case("awq", 16, 128, 1);
  DeviceArray<__nv_bfloat16> x(128), y(16);
  EXPECT_THROW(
      launch_quantized_gemv({.x = x.get(), .weight = c->view(), .y = y.get(), .num_rows = 1}, {6, 3}, test_stream()),
      Error);
}

}  // namespace
}  // namespace qinfer::cuda
