// The Hopper skinny GEMM (3..128 rows) against a float64 reference on random inputs, outputs poisoned beforehand:
// every decode linear shape of Qwen3-4B, odd row counts, several block counts (tiles shared unevenly between blocks)
// and the SwiGLU epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/skinny_gemm.h"
#include "backend/cuda/kernels/swiglu.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;
using testing::random_bf16;
using testing::to_float;

constexpr double kBf16Tolerance = 1e-2;

#define SKIP_WITHOUT_SKINNY_GEMM()                                                         \
  do {                                                                                     \
    SKIP_WITHOUT_GPU();                                                                    \
    if (!skinny_gemm_available()) GTEST_SKIP() << "the skinny GEMM needs sm_90a (Hopper)"; \
  } while (0)

// Scratch for shared tiles as the backend allocates it: counters zeroed once.
struct SplitScratch {
  SplitScratch() {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    partials = DeviceBuffer(skinny_gemm_partials_bytes(sms), "test partials");
    counters = DeviceBuffer(static_cast<size_t>(skinny_gemm_max_counters(sms)) * 4, "test counters");
    CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
  }
  SkinnyGemmParams params(const __nv_bfloat16* x, const __nv_bfloat16* weight, void* y, int rows, int n, int k) const {
    SkinnyGemmParams p;
    p.x = x;
    p.weight = weight;
    p.y = y;
    p.num_rows = rows;
    p.n = n;
    p.k = k;
    p.split_partials = partials.as<float>();
    p.split_counters = counters.as<uint32_t>();
    return p;
  }
  DeviceBuffer partials, counters;
};

// The columns checked against the reference: about 500 spread over n plus the last 130 (the partial last tile),
// since a float64 reference of every column of lm_head would take minutes.
std::vector<int> checked_columns(int n) {
  std::vector<int> columns;
  const int stride = std::max(1, n / 500);
  for (int c = 0; c < n; ++c)
    if (c % stride == 0 || c >= n - 130) columns.push_back(c);
  return columns;
}

// out [rows, n] against float64 x·wᵀ on `columns`, where f maps the linear's row to the expected row; every element
// of out must be finite (the poison overwritten).
template <typename T>
void expect_matches(const std::vector<T>& out, const std::vector<__nv_bfloat16>& x, const std::vector<__nv_bfloat16>& w,
                    int rows, int n, int k, double tolerance, const std::string& what) {
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_TRUE(std::isfinite(to_float(out[i]))) << what << ": element " << i << " not written";
  double diff = 0, norm = 0;
  for (int c : checked_columns(n))
    for (int r = 0; r < rows; ++r) {
      double sum = 0;
      for (int i = 0; i < k; ++i)
        sum += static_cast<double>(to_float(x[static_cast<size_t>(r) * k + i])) *
               to_float(w[static_cast<size_t>(c) * k + i]);
      const double got = to_float(out[static_cast<size_t>(r) * n + c]);
      diff += (got - sum) * (got - sum);
      norm += sum * sum;
    }
  EXPECT_LT(std::sqrt(diff / std::max(norm, 1e-30)), tolerance) << what;
}

struct SkinnyShape {
  int rows, n, k;
  int blocks;  // 0: one per SM
  bool y_fp32;
};

class SkinnyGemmTest : public ::testing::TestWithParam<SkinnyShape> {};

TEST_P(SkinnyGemmTest, MatchesReference) {
  SKIP_WITHOUT_SKINNY_GEMM();
  const auto [rows, n, k, blocks, y_fp32] = GetParam();
  std::mt19937 rng(rows * 7919 + n + k + blocks);
  const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
  const auto w = random_bf16(static_cast<size_t>(n) * k, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  DeviceArray<__nv_bfloat16> dx(x), dw(w), dy(static_cast<size_t>(rows) * n);
  DeviceArray<float> dy32(static_cast<size_t>(rows) * n);
  const SplitScratch scratch;
  SkinnyGemmParams p =
      scratch.params(dx.get(), dw.get(), y_fp32 ? static_cast<void*>(dy32.get()) : dy.get(), rows, n, k);
  p.blocks = blocks;
  p.y_fp32 = y_fp32;
  const std::string what = std::to_string(rows) + " x " + std::to_string(n) + " x " + std::to_string(k) + ", " +
                           std::to_string(blocks) + " blocks";
  launch_skinny_gemm(p, nullptr);
  CUDA_CHECK(cudaGetLastError());
  if (y_fp32) {
    const auto first = dy32.download();
    expect_matches(first, x, w, rows, n, k, 1e-5, what);
    // A second launch reuses the counters the first left at zero: the same bits.
    launch_skinny_gemm(p, nullptr);
    EXPECT_EQ(dy32.download(), first) << what;
  } else {
    const auto first = dy.download();
    expect_matches(first, x, w, rows, n, k, kBf16Tolerance, what);
    launch_skinny_gemm(p, nullptr);
    const auto second = dy.download();
    for (size_t i = 0; i < first.size(); ++i)
      ASSERT_EQ(to_float(first[i]), to_float(second[i])) << what << ": element " << i << " differs on a rerun";
  }
}

// Qwen3-4B decode linears: qkv 2560 -> 6144, o_proj 4096 -> 2560, gate_up 2560 -> 19456, down 9728 -> 2560,
// lm_head 2560 -> 151936 (fp32 logits); odd rows and both consumer counts (<= 64, 65..128 rows); forced block
// counts (one block: no shared tile; 3, 5, 7: uneven shares) and small shapes whose last tile is partial.
INSTANTIATE_TEST_SUITE_P(
    Shapes, SkinnyGemmTest,
    ::testing::Values(SkinnyShape{3, 6144, 2560, 0, false}, SkinnyShape{64, 6144, 2560, 0, false},
                      SkinnyShape{127, 6144, 2560, 0, false}, SkinnyShape{5, 2560, 4096, 0, false},
                      SkinnyShape{64, 2560, 4096, 0, false}, SkinnyShape{64, 2560, 4096, 7, false},
                      SkinnyShape{100, 2560, 4096, 0, false}, SkinnyShape{17, 19456, 2560, 0, false},
                      SkinnyShape{64, 19456, 2560, 0, false}, SkinnyShape{128, 19456, 2560, 0, false},
                      SkinnyShape{33, 2560, 9728, 0, false}, SkinnyShape{64, 2560, 9728, 0, false},
                      SkinnyShape{64, 2560, 9728, 1, false}, SkinnyShape{65, 2560, 9728, 3, false},
                      SkinnyShape{8, 151936, 2560, 0, true}, SkinnyShape{64, 151936, 2560, 0, true},
                      SkinnyShape{128, 151936, 2560, 0, true}, SkinnyShape{3, 200, 64, 0, false},
                      SkinnyShape{9, 130, 576, 5, true}, SkinnyShape{71, 77, 1024, 0, false}));

// SwiGLU in the epilogue: against float64 silu(gate) * up, and, with one block (each column summed in k order by one
// block in both kernels), bit for bit against the unfused path (the same kernel writing gate_up, then the SwiGLU
// kernel).
TEST(SkinnyGemmSwiglu, MatchesReferenceAndUnfusedPath) {
  SKIP_WITHOUT_SKINNY_GEMM();
  std::mt19937 rng(31);
  const SplitScratch scratch;
  struct Case {
    int rows, inter, k;
  };
  for (const auto [rows, inter, k] :
       {Case{64, 9728, 2560}, Case{3, 9728, 2560}, Case{100, 9728, 2560}, Case{7, 80, 512}, Case{128, 200, 256}}) {
    const auto x = random_bf16(static_cast<size_t>(rows) * k, rng);
    const auto w = random_bf16(static_cast<size_t>(2 * inter) * k, rng, 2.0f / std::sqrt(static_cast<float>(k)));
    DeviceArray<__nv_bfloat16> dx(x), dw(w), gate_up(static_cast<size_t>(rows) * 2 * inter),
        unfused(static_cast<size_t>(rows) * inter), fused(static_cast<size_t>(rows) * inter),
        fused_one_block(static_cast<size_t>(rows) * inter);
    SkinnyGemmParams p = scratch.params(dx.get(), dw.get(), fused.get(), rows, 2 * inter, k);
    p.swiglu = true;
    launch_skinny_gemm(p, nullptr);
    p.blocks = 1;
    p.y = fused_one_block.get();
    launch_skinny_gemm(p, nullptr);
    SkinnyGemmParams linear = p;
    linear.swiglu = false;
    linear.y = gate_up.get();
    launch_skinny_gemm(linear, nullptr);
    launch_swiglu({gate_up.get(), unfused.get(), rows, inter}, nullptr);
    CUDA_CHECK(cudaGetLastError());

    const auto got = fused.download();
    double diff = 0, norm = 0;
    for (int r = 0; r < rows; ++r)
      for (int j : checked_columns(inter)) {
        double g = 0, u = 0;
        for (int i = 0; i < k; ++i) {
          const double xv = to_float(x[static_cast<size_t>(r) * k + i]);
          g += xv * to_float(w[static_cast<size_t>(j) * k + i]);
          u += xv * to_float(w[static_cast<size_t>(inter + j) * k + i]);
        }
        const double want = g / (1 + std::exp(-g)) * u;
        const double out = to_float(got[static_cast<size_t>(r) * inter + j]);
        ASSERT_TRUE(std::isfinite(out)) << rows << " x " << inter << ": row " << r << " column " << j;
        diff += (out - want) * (out - want);
        norm += want * want;
      }
    EXPECT_LT(std::sqrt(diff / norm), kBf16Tolerance) << rows << " x " << inter;
    const auto one_block = fused_one_block.download(), want = unfused.download();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(to_float(one_block[i]), to_float(want[i])) << rows << " x " << inter << ": element " << i;
  }
}

}  // namespace
}  // namespace qinfer::cuda
