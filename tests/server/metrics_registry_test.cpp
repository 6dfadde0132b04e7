#include "server/metrics_registry.h"

#include <gtest/gtest.h>

namespace qinfer::server {
namespace {

TEST(MetricsRegistry, RendersPrometheusTextFormat) {
  MetricsRegistry registry;
  registry.counter("qinfer_x_total", "Things", {{"code", "200"}}).inc(3);
  registry.counter("qinfer_x_total", "Things", {{"code", "400"}}).inc();
  registry.gauge("qinfer_g", "A gauge").set(0.25);
  Histogram& h = registry.histogram("qinfer_h_seconds", "Latency", {0.125, 1.0});
  h.observe(0.0625);
  h.observe(0.125);  // on a bound: counts in that bucket (le is inclusive)
  h.observe(5.0);
  const std::string expected =
      "# HELP qinfer_g A gauge\n"
      "# TYPE qinfer_g gauge\n"
      "qinfer_g 0.25\n"
      "# HELP qinfer_h_seconds Latency\n"
      "# TYPE qinfer_h_seconds histogram\n"
      "qinfer_h_seconds_bucket{le=\"0.125\"} 2\n"
      "qinfer_h_seconds_bucket{le=\"1\"} 2\n"
      "qinfer_h_seconds_bucket{le=\"+Inf\"} 3\n"
      "qinfer_h_seconds_sum 5.1875\n"
      "qinfer_h_seconds_count 3\n"
      "# HELP qinfer_x_total Things\n"
      "# TYPE qinfer_x_total counter\n"
      "qinfer_x_total{code=\"200\"} 3\n"
      "qinfer_x_total{code=\"400\"} 1\n";
  EXPECT_EQ(registry.render(), expected);
}

TEST(MetricsRegistry, EscapesLabelValuesAndReturnsTheSameSeries) {
  MetricsRegistry registry;
  Counter& a = registry.counter("c_total", "h", {{"v", "a\"b\\c\nd"}});
  Counter& b = registry.counter("c_total", "h", {{"v", "a\"b\\c\nd"}});
  EXPECT_EQ(&a, &b);
  a.inc();
  EXPECT_NE(registry.render().find("c_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace qinfer::server
