// A small Prometheus metrics registry: counters, gauges and histograms, optionally labelled, rendered in the text
// exposition format (version 0.0.4). Metric objects live as long as the registry and are updated lock-free (counters,
// gauges, histogram buckets and sums); render() may run concurrently with updates.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace qinfer::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  // Mirrors a total kept elsewhere (e.g. the engine's preemption count); totals only grow.
  void set_total(double total) { value_.store(total, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `upper_bounds` ascending; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // [upper_bounds.size() + 1], the last is +Inf
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  // Lock-free: every streamed token observes the inter-token histogram from its own connection thread. A scrape may
  // see a count and the sum from slightly different instants, as with Prometheus' own client libraries.
  const std::vector<double> upper_bounds_;
  std::vector<std::atomic<uint64_t>> bucket_counts_;  // [upper_bounds.size() + 1], not cumulative
  std::atomic<double> sum_{0.0};
};

class MetricsRegistry {
 public:
  // Returns the metric of that name and label set, creating it (and its family) on first use. The reference stays
  // valid for the registry's lifetime. A name must always be used with the same type.
  Counter& counter(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& upper_bounds,
                       const MetricLabels& labels = {});

  // A gauge family with no series yet: /metrics lists its HELP and TYPE before (or without) any sample, so that
  // dashboards can be checked against what is exported on machines that never produce it (no GPU).
  void declare_gauge(const std::string& name, const std::string& help);

  // Text exposition format, families in name order.
  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, Series> series;  // by rendered label set, e.g. {code="200"}
  };
  Series& series(const std::string& name, const std::string& help, Type type, const MetricLabels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace qinfer::server
