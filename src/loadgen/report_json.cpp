#include "loadgen/report_json.h"

#include "util/error.h"
#include "util/json_file.h"

namespace qinfer::loadgen {

namespace {

using Json = nlohmann::json;

template <typename T>
Json optional_json(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json distribution_json(const std::optional<Distribution>& d) {
  if (!d) return nullptr;
  return {{"count", d->count}, {"mean", d->mean}, {"p50", d->p50}, {"p90", d->p90}, {"p99", d->p99}};
}

Json gpu_json(const GpuSummary& g) {
  return {{"samples", g.samples},
          {"utilization_mean", optional_json(g.utilization_mean)},
          {"utilization_max", optional_json(g.utilization_max)},
          {"memory_used_peak_bytes", optional_json(g.memory_used_peak_bytes)},
          {"memory_used_mean_bytes", optional_json(g.memory_used_mean_bytes)},
          {"memory_total_bytes", optional_json(g.memory_total_bytes)}};
}

Json level_json(const LevelResult& l) {
  Json errors = Json::object();
  for (const auto& [kind, count] : l.errors) errors[kind] = count;
  Json samples = Json::object();
  for (const auto& [kind, message] : l.error_samples) samples[kind] = message;
  return {{"name", level_name(l)},
          {"concurrency", optional_json(l.concurrency)},
          {"request_rate", optional_json(l.request_rate)},
          {"num_requests", l.num_requests},
          {"completed", l.completed},
          {"failed", l.failed},
          {"duration_s", l.duration_s},
          {"request_throughput", l.request_throughput},
          {"output_throughput", l.output_throughput},
          {"total_token_throughput", l.total_token_throughput},
          {"total_input_tokens", l.total_input_tokens},
          {"total_output_tokens", l.total_output_tokens},
          {"ttft_ms", distribution_json(l.ttft_ms)},
          {"tpot_ms", distribution_json(l.tpot_ms)},
          {"itl_ms", distribution_json(l.itl_ms)},
          {"e2e_ms", distribution_json(l.e2e_ms)},
          {"errors", errors},
          {"error_samples", samples},
          {"gpu", gpu_json(l.gpu)},
          {"peak_in_flight", l.peak_in_flight},
          {"client_cpu_seconds", l.client_cpu_seconds}};
}

template <typename T>
std::optional<T> optional_field(const Json& obj, const std::string& name, const std::filesystem::path& file) {
  if (!obj.contains(name) || obj.at(name).is_null()) return std::nullopt;
  return json_field<T>(obj, name, file);
}

std::optional<Distribution> distribution_from(const Json& obj, const std::string& name,
                                              const std::filesystem::path& file) {
  if (!obj.contains(name) || obj.at(name).is_null()) return std::nullopt;
  const Json& d = obj.at(name);
  if (!d.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": field '" + name + "' expected an object");
  return Distribution{.count = static_cast<size_t>(json_field<int64_t>(d, "count", file)),
                      .mean = json_field<double>(d, "mean", file),
                      .p50 = json_field<double>(d, "p50", file),
                      .p90 = json_field<double>(d, "p90", file),
                      .p99 = json_field<double>(d, "p99", file)};
}

GpuSummary gpu_from(const Json& g, const std::filesystem::path& file) {
  GpuSummary summary;
  summary.samples = json_field_or<int>(g, "samples", 0, file);
  summary.utilization_mean = optional_field<double>(g, "utilization_mean", file);
  summary.utilization_max = optional_field<double>(g, "utilization_max", file);
  summary.memory_used_peak_bytes = optional_field<double>(g, "memory_used_peak_bytes", file);
  summary.memory_used_mean_bytes = optional_field<double>(g, "memory_used_mean_bytes", file);
  summary.memory_total_bytes = optional_field<double>(g, "memory_total_bytes", file);
  return summary;
}

LevelResult level_from(const Json& l, const std::filesystem::path& file) {
  if (!l.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": each of 'levels' expected an object");
  LevelResult level;
  level.concurrency = optional_field<int>(l, "concurrency", file);
  level.request_rate = optional_field<double>(l, "request_rate", file);
  level.num_requests = json_field<int>(l, "num_requests", file);
  level.completed = json_field<int>(l, "completed", file);
  level.failed = json_field<int>(l, "failed", file);
  level.duration_s = json_field<double>(l, "duration_s", file);
  level.request_throughput = json_field<double>(l, "request_throughput", file);
  level.output_throughput = json_field<double>(l, "output_throughput", file);
  level.total_token_throughput = json_field<double>(l, "total_token_throughput", file);
  level.total_input_tokens = json_field<int64_t>(l, "total_input_tokens", file);
  level.total_output_tokens = json_field<int64_t>(l, "total_output_tokens", file);
  level.ttft_ms = distribution_from(l, "ttft_ms", file);
  level.tpot_ms = distribution_from(l, "tpot_ms", file);
  level.itl_ms = distribution_from(l, "itl_ms", file);
  level.e2e_ms = distribution_from(l, "e2e_ms", file);
  if (l.contains("errors") && l.at("errors").is_object())
    for (const auto& [kind, count] : l.at("errors").items())
      level.errors[kind] = json_field<int>(l.at("errors"), kind, file);
  if (l.contains("error_samples") && l.at("error_samples").is_object())
    for (const auto& [kind, message] : l.at("error_samples").items())
      level.error_samples[kind] = json_field<std::string>(l.at("error_samples"), kind, file);
  if (l.contains("gpu") && l.at("gpu").is_object()) level.gpu = gpu_from(l.at("gpu"), file);
  level.peak_in_flight = json_field_or<int>(l, "peak_in_flight", 0, file);
  level.client_cpu_seconds = json_field_or<double>(l, "client_cpu_seconds", 0, file);
  return level;
}

}  // namespace

nlohmann::json report_to_json(const BenchReport& r) {
  Json levels = Json::array();
  for (const LevelResult& level : r.levels) levels.push_back(level_json(level));
  return {{"schema", kBenchServeSchema},
          {"label", r.label},
          {"url", r.url},
          {"endpoint", r.endpoint},
          {"model", r.model},
          {"dataset", r.dataset},
          {"input_len", r.input_len},
          {"output_len", r.output_len},
          {"num_prompts", r.num_prompts},
          {"seed", static_cast<int64_t>(r.seed)},
          {"started_at", r.started_at},
          {"levels", levels}};
}

BenchReport report_from_json(const nlohmann::json& json, const std::filesystem::path& file) {
  if (!json.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": expected a JSON object");
  const std::string schema = json_field<std::string>(json, "schema", file);
  if (schema != kBenchServeSchema)
    throw Error(ErrorKind::kFormat, file.string() + ": field 'schema' expected \"" + std::string(kBenchServeSchema) +
                                        "\", got \"" + schema + "\"");
  BenchReport r;
  r.label = json_field<std::string>(json, "label", file);
  r.url = json_field_or<std::string>(json, "url", "", file);
  r.endpoint = json_field_or<std::string>(json, "endpoint", "", file);
  r.model = json_field_or<std::string>(json, "model", "", file);
  r.dataset = json_field_or<std::string>(json, "dataset", "", file);
  r.input_len = json_field_or<int>(json, "input_len", 0, file);
  r.output_len = json_field_or<int>(json, "output_len", 0, file);
  r.num_prompts = json_field_or<int>(json, "num_prompts", 0, file);
  r.seed = static_cast<uint64_t>(json_field_or<int64_t>(json, "seed", 0, file));
  r.started_at = json_field_or<std::string>(json, "started_at", "", file);
  const Json& levels = json.contains("levels") ? json.at("levels") : Json();
  if (!levels.is_array()) throw Error(ErrorKind::kFormat, file.string() + ": field 'levels' expected an array");
  for (const Json& level : levels) r.levels.push_back(level_from(level, file));
  return r;
}

}  // namespace qinfer::loadgen
