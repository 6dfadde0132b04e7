// util: half-precision conversions, the thread pool, memory-mapped files.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>

#include "util/error.h"
#include "util/half.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace qinfer {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly half-way between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(INFINITY)), INFINITY);
}

TEST(Half, Fp16DecodesNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(fp16_to_float(0x7c00), INFINITY);
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_EQ(std::signbit(fp16_to_float(0x8000)), true);
}

TEST(Half, Fp16EncodesEveryValueBackAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float value = fp16_to_float(bits);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(value))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(value), bits) << std::hex << h;
    // Halfway to the next value up (in magnitude): ties go to the even code.
    const uint16_t next = static_cast<uint16_t>(bits + 1);
    if ((bits & 0x7fffu) >= 0x7bffu) continue;
    const double halfway = (static_cast<double>(value) + fp16_to_float(next)) / 2;
    ASSERT_EQ(float_to_fp16(static_cast<float>(halfway)), (bits & 1u) ? next : bits) << std::hex << h;
  }
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds past the largest finite value
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);  // half the smallest subnormal: ties to even (zero)
  EXPECT_EQ(float_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_fp16(-1e-30f), 0x8000);
}

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (size_t n : {0ul, 1ul, 3ul, 4ul, 1000ul}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, RunsManyJobsInSequence) {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  for (int job = 0; job < 2000; ++job)
    pool.parallel_for(10, [&](size_t b, size_t e) { total += static_cast<long>(e - b); });
  EXPECT_EQ(total.load(), 20000);
}

TEST(MappedFile, MapsBytesAndReportsMissingFiles) {
  auto path = std::filesystem::temp_directory_path() / ("qinfer-map-" + std::to_string(::getpid()));
  std::ofstream(path) << "hello";
  MappedFile f(path);
  ASSERT_EQ(f.bytes().size(), 5u);
  EXPECT_EQ(static_cast<char>(f.bytes()[4]), 'o');
  MappedFile moved = std::move(f);
  EXPECT_EQ(moved.bytes().size(), 5u);
  std::filesystem::remove(path);
  try {
    MappedFile missing(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
  }
}

}  // namespace
}  // namespace qinfer
