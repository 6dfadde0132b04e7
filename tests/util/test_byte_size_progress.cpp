// Byte sizes as flags take them and logs print them, and the progress bar's text.
#include <gtest/gtest.h>

#include "util/byte_size.h"
#include "util/progress.h"

namespace qinfer {
namespace {

TEST(ByteSize, ParsesUnitsAsVllmDoes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("512B"), 512);
  EXPECT_EQ(parse_byte_size("2k"), 2000);
  EXPECT_EQ(parse_byte_size("2K"), 2048);
  EXPECT_EQ(parse_byte_size("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8G"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8g"), 8'000'000'000);
  EXPECT_EQ(parse_byte_size("8GB"), 8'000'000'000);
  EXPECT_EQ(parse_byte_size("1.5MiB"), 1572864);
  EXPECT_EQ(parse_byte_size("4e9"), 4'000'000'000);
  EXPECT_EQ(parse_byte_size("1TiB"), int64_t{1} << 40);
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", "GiB", "-1G", "8 GiB", "8XB", "8GiBs", "nan", "inf", "1e30"})
    EXPECT_FALSE(parse_byte_size(text).has_value()) << text;
}

TEST(ByteSize, FormatsInBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 * 1024), "3.00 KiB");
  EXPECT_EQ(format_bytes(int64_t{312} << 20), "312 MiB");
  EXPECT_EQ(format_bytes(8'040'000'000), "7.49 GiB");
  EXPECT_EQ(format_bytes(int64_t{36} << 30), "36.0 GiB");
}

TEST(Progress, BarShowsFractionBytesAndRate) {
  EXPECT_EQ(ProgressReporter::render_bar(int64_t{4} << 30, int64_t{8} << 30, 2.0),
            "[===============>              ]  50% 4.00 GiB / 8.00 GiB 2.00 GiB/s");
  EXPECT_EQ(ProgressReporter::render_bar(0, 100, 0.0), "[>                             ]   0% 0 B / 100 B");
  EXPECT_EQ(ProgressReporter::render_bar(100, 100, 1.0), "[==============================] 100% 100 B / 100 B 100 B/s");
}

TEST(Progress, FinishReportsElapsedTimeOnce) {
  ProgressReporter progress("test work", 1000, ProgressReporter::Style::kLines);
  for (int i = 0; i < 10; ++i) progress.advance(100);
  const double first = progress.finish();
  EXPECT_GE(first, 0.0);
  EXPECT_GE(progress.finish(), first);
}

}  // namespace
}  // namespace qinfer
