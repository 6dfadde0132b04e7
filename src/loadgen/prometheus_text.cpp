#include "loadgen/prometheus_text.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace qinfer::loadgen {

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

void skip_spaces(std::string_view line, size_t& pos) {
  while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
}

// Parses `{a="x",b="y"}` starting at line[pos] == '{'; leaves pos after '}'. False when malformed.
bool parse_labels(std::string_view line, size_t& pos, std::map<std::string, std::string>& labels) {
  ++pos;
  while (true) {
    skip_spaces(line, pos);
    if (pos < line.size() && line[pos] == '}') {
      ++pos;
      return true;
    }
    const size_t name_start = pos;
    while (pos < line.size() && is_name_char(line[pos])) ++pos;
    if (pos == name_start) return false;
    std::string name(line.substr(name_start, pos - name_start));
    skip_spaces(line, pos);
    if (pos + 1 >= line.size() || line[pos] != '=' || line[pos + 1] != '"') return false;
    pos += 2;
    std::string value;
    while (pos < line.size() && line[pos] != '"') {
      if (line[pos] == '\\' && pos + 1 < line.size()) {
        ++pos;
        value.push_back(line[pos] == 'n' ? '\n' : line[pos]);
      } else {
        value.push_back(line[pos]);
      }
      ++pos;
    }
    if (pos >= line.size()) return false;
    ++pos;
    labels.emplace(std::move(name), std::move(value));
    skip_spaces(line, pos);
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
}

std::optional<double> parse_value(std::string_view token) {
  if (token == "NaN") return std::nan("");
  if (token == "+Inf" || token == "Inf") return HUGE_VAL;
  if (token == "-Inf") return -HUGE_VAL;
  double value = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (error != std::errc{} || end != token.data() + token.size()) return std::nullopt;
  return value;
}

std::optional<PrometheusSample> parse_line(std::string_view line) {
  size_t pos = 0;
  skip_spaces(line, pos);
  if (pos >= line.size() || line[pos] == '#') return std::nullopt;
  PrometheusSample sample;
  const size_t name_start = pos;
  while (pos < line.size() && is_name_char(line[pos])) ++pos;
  if (pos == name_start) return std::nullopt;
  sample.name = std::string(line.substr(name_start, pos - name_start));
  if (pos < line.size() && line[pos] == '{' && !parse_labels(line, pos, sample.labels)) return std::nullopt;
  skip_spaces(line, pos);
  const size_t value_start = pos;
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
  const std::optional<double> value = parse_value(line.substr(value_start, pos - value_start));
  if (!value) return std::nullopt;
  sample.value = *value;
  return sample;
}

}  // namespace

std::vector<PrometheusSample> parse_prometheus_text(std::string_view text) {
  std::vector<PrometheusSample> samples;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (std::optional<PrometheusSample> sample = parse_line(line)) samples.push_back(std::move(*sample));
    start = end + 1;
  }
  return samples;
}

GpuReading gpu_reading(const std::vector<PrometheusSample>& samples) {
  GpuReading reading;
  int utilization_series = 0;
  const auto add = [](std::optional<double>& total, double value) { total = total.value_or(0) + value; };
  for (const PrometheusSample& s : samples) {
    if (s.name == "qinfer_gpu_utilization_ratio") {
      add(reading.utilization_ratio, s.value);
      ++utilization_series;
    } else if (s.name == "qinfer_gpu_memory_used_bytes") {
      add(reading.memory_used_bytes, s.value);
    } else if (s.name == "qinfer_gpu_memory_total_bytes") {
      add(reading.memory_total_bytes, s.value);
    }
  }
  if (utilization_series > 0) *reading.utilization_ratio /= utilization_series;
  return reading;
}

std::optional<SpeculationCounters> speculation_counters(const std::vector<PrometheusSample>& samples) {
  std::optional<SpeculationCounters> counters;
  for (const PrometheusSample& s : samples) {
    double SpeculationCounters::*field =
        s.name == "qinfer_spec_decode_num_drafts_total"        ? &SpeculationCounters::num_drafts
        : s.name == "qinfer_spec_decode_draft_tokens_total"    ? &SpeculationCounters::draft_tokens
        : s.name == "qinfer_spec_decode_accepted_tokens_total" ? &SpeculationCounters::accepted_tokens
                                                               : nullptr;
    if (field == nullptr) continue;
    if (!counters) counters.emplace();
    (*counters).*field += s.value;
  }
  return counters;
}

}  // namespace qinfer::loadgen
