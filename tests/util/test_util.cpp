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
