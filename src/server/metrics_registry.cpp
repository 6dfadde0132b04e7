#include "server/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace qinfer::server {
namespace {

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string render_labels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + escape_label_value(labels[i].second) + '"';
  }
  return out + '}';
}

// Prometheus wants Go-style floats: shortest round-trip form, +Inf/-Inf/NaN spelled out.
std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  // Use the shorter form when it round-trips.
  char shorter[32];
  std::snprintf(shorter, sizeof shorter, "%.15g", value);
  return std::strtod(shorter, nullptr) == value ? shorter : buffer;
}

// Adds one label to an already rendered label set ("" or "{a=\"b\"}").
std::string with_label(const std::string& rendered, const std::string& name, const std::string& value) {
  std::string extra = name + "=\"" + value + '"';
  if (rendered.empty()) return '{' + extra + '}';
  return rendered.substr(0, rendered.size() - 1) + ',' + extra + '}';
}

const char* type_name(int type) {
  static constexpr const char* kNames[] = {"counter", "gauge", "histogram"};
  return kNames[type];
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1) {
  QINFER_CHECK(std::is_sorted(upper_bounds_.begin(), upper_bounds_.end()), "histogram bounds must ascend");
}

void Histogram::observe(double value) {
  size_t bucket =
      static_cast<size_t>(std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  bucket_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  uint64_t running = 0;
  for (const std::atomic<uint64_t>& count : bucket_counts_)
    snapshot.cumulative_counts.push_back(running += count.load(std::memory_order_relaxed));
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

MetricsRegistry::Series& MetricsRegistry::series(const std::string& name, const std::string& help, Type type,
                                                 const MetricLabels& labels) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name, Family{type, help, {}});
  QINFER_CHECK(it->second.type == type, "metric registered twice with different types");
  return it->second.series[render_labels(labels)];
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, const MetricLabels& labels) {
  Series& s = series(name, help, Type::kCounter, labels);
  std::lock_guard lock(mutex_);
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const MetricLabels& labels) {
  Series& s = series(name, help, Type::kGauge, labels);
  std::lock_guard lock(mutex_);
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const std::vector<double>& upper_bounds, const MetricLabels& labels) {
  Series& s = series(name, help, Type::kHistogram, labels);
  std::lock_guard lock(mutex_);
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(upper_bounds);
  return *s.histogram;
}

void MetricsRegistry::declare_gauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name, Family{Type::kGauge, help, {}});
  QINFER_CHECK(it->second.type == Type::kGauge, "metric registered twice with different types");
}

std::string MetricsRegistry::render() const {
  std::string out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + ' ' + family.help + '\n';
    out += "# TYPE " + name + ' ' + type_name(static_cast<int>(family.type)) + '\n';
    for (const auto& [labels, s] : family.series) {
      if (s.counter) out += name + labels + ' ' + format_value(s.counter->value()) + '\n';
      if (s.gauge) out += name + labels + ' ' + format_value(s.gauge->value()) + '\n';
      if (!s.histogram) continue;
      Histogram::Snapshot h = s.histogram->snapshot();
      for (size_t i = 0; i < h.cumulative_counts.size(); ++i) {
        std::string le = i < h.upper_bounds.size() ? format_value(h.upper_bounds[i]) : "+Inf";
        out += name + "_bucket" + with_label(labels, "le", le) + ' ' + std::to_string(h.cumulative_counts[i]) + '\n';
      }
      out += name + "_sum" + labels + ' ' + format_value(h.sum) + '\n';
      out += name + "_count" + labels + ' ' + std::to_string(h.cumulative_counts.back()) + '\n';
    }
  }
  return out;
}

}  // namespace qinfer::server
