// Percentiles against numpy.percentile's default (method "linear"): the q-th percentile of n sorted values sits at
// position h = (n - 1) * q / 100 and is x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
// Expected values below are worked out by hand from that definition and agree with numpy 1.26/2.x.
#include "loadgen/percentiles.h"

#include <gtest/gtest.h>

namespace qinfer::loadgen {
namespace {

TEST(Percentiles, FourValuesMedianInterpolates) {
  // np.percentile([1, 2, 3, 4], 50) == 2.5: h = 1.5.
  const std::vector<double> sorted = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_linear(sorted, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile_linear(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_linear(sorted, 100), 4);
}

TEST(Percentiles, OneToTen) {
  // np.percentile(range(1, 11), [50, 90, 99]) == [5.5, 9.1, 9.91]: h = 4.5, 8.1, 8.91.
  const std::vector<double> sorted = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile_linear(sorted, 50), 5.5);
  EXPECT_NEAR(percentile_linear(sorted, 90), 9.1, 1e-12);
  EXPECT_NEAR(percentile_linear(sorted, 99), 9.91, 1e-12);
}

TEST(Percentiles, UnevenGaps) {
  // np.percentile([15, 20, 35, 40, 50], [50, 90, 99]) == [35, 46, 49.6]: h = 2, 3.6, 3.96.
  const std::vector<double> sorted = {15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile_linear(sorted, 50), 35);
  EXPECT_NEAR(percentile_linear(sorted, 90), 46, 1e-12);
  EXPECT_NEAR(percentile_linear(sorted, 99), 49.6, 1e-12);
}

TEST(Percentiles, SummarizeSortsAndAverages) {
  const std::optional<Distribution> d = summarize({50, 15, 40, 20, 35});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->count, 5u);
  EXPECT_DOUBLE_EQ(d->mean, 32);
  EXPECT_DOUBLE_EQ(d->p50, 35);
  EXPECT_NEAR(d->p90, 46, 1e-12);
  EXPECT_NEAR(d->p99, 49.6, 1e-12);
}

TEST(Percentiles, OneValueIsEveryPercentile) {
  const std::optional<Distribution> d = summarize({7.25});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->p50, 7.25);
  EXPECT_EQ(d->p90, 7.25);
  EXPECT_EQ(d->p99, 7.25);
}

TEST(Percentiles, NoValuesIsNull) { EXPECT_FALSE(summarize({})); }

}  // namespace
}  // namespace qinfer::loadgen
