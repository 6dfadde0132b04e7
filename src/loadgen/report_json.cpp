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

// The numbers a level and each of its classes share (LevelResult and ClassResult name them alike).
template <typename Result>
Json request_numbers_json(const Result& r) {
  return {{"num_requests", r.num_requests},
          {"completed", r.completed},
          {"failed", r.failed},
          {"output_throughput", r.output_throughput},
          {"total_input_tokens", r.total_input_tokens},
          {"total_output_tokens", r.total_output_tokens},
          {"ttft_ms", distribution_json(r.ttft_ms)},
          {"tpot_ms", distribution_json(r.tpot_ms)},
          {"itl_ms", distribution_json(r.itl_ms)},
          {"e2e_ms", distribution_json(r.e2e_ms)}};
}

Json level_json(const LevelResult& l) {
  Json errors = Json::object();
  for (const auto& [kind, count] : l.errors) errors[kind] = count;
  Json samples = Json::object();
  for (const auto& [kind, message] : l.error_samples) samples[kind] = message;
  Json classes = Json::object();
  for (const auto& [name, c] : l.classes) classes[name] = request_numbers_json(c);
  Json json = request_numbers_json(l);
  json.update({{"name", level_name(l)},
               {"concurrency", optional_json(l.concurrency)},
               {"request_rate", optional_json(l.request_rate)},
               {"duration_s", l.duration_s},
               {"request_throughput", l.request_throughput},
               {"total_token_throughput", l.total_token_throughput},
               {"errors", errors},
               {"error_samples", samples},
               {"gpu", gpu_json(l.gpu)},
               {"speculation", l.speculation ? Json{{"num_drafts", l.speculation->num_drafts},
                                                    {"draft_tokens", l.speculation->draft_tokens},
                                                    {"accepted_tokens", l.speculation->accepted_tokens},
                                                    {"acceptance_rate", l.speculation->acceptance_rate()},
                                                    {"mean_accepted_length", l.speculation->mean_accepted_length()}}
                                             : Json()},
               {"peak_in_flight", l.peak_in_flight},
               {"client_cpu_seconds", l.client_cpu_seconds},
               {"classes", classes}});
  return json;
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

template <typename Result>
void read_request_numbers(const Json& obj, const std::filesystem::path& file, Result& r) {
  r.num_requests = json_field<int>(obj, "num_requests", file);
  r.completed = json_field<int>(obj, "completed", file);
  r.failed = json_field<int>(obj, "failed", file);
  r.output_throughput = json_field<double>(obj, "output_throughput", file);
  r.total_input_tokens = json_field<int64_t>(obj, "total_input_tokens", file);
  r.total_output_tokens = json_field<int64_t>(obj, "total_output_tokens", file);
  r.ttft_ms = distribution_from(obj, "ttft_ms", file);
  r.tpot_ms = distribution_from(obj, "tpot_ms", file);
  r.itl_ms = distribution_from(obj, "itl_ms", file);
  r.e2e_ms = distribution_from(obj, "e2e_ms", file);
}

ClassResult class_from(const Json& c, const std::filesystem::path& file) {
  if (!c.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": each of 'classes' expected an object");
  ClassResult result;
  read_request_numbers(c, file, result);
  return result;
}

LevelResult level_from(const Json& l, const std::filesystem::path& file) {
  if (!l.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": each of 'levels' expected an object");
  LevelResult level;
  level.concurrency = optional_field<int>(l, "concurrency", file);
  level.request_rate = optional_field<double>(l, "request_rate", file);
  read_request_numbers(l, file, level);
  level.duration_s = json_field<double>(l, "duration_s", file);
  level.request_throughput = json_field<double>(l, "request_throughput", file);
  level.total_token_throughput = json_field<double>(l, "total_token_throughput", file);
  if (l.contains("errors") && l.at("errors").is_object())
    for (const auto& [kind, count] : l.at("errors").items())
      level.errors[kind] = json_field<int>(l.at("errors"), kind, file);
  if (l.contains("error_samples") && l.at("error_samples").is_object())
    for (const auto& [kind, message] : l.at("error_samples").items())
      level.error_samples[kind] = json_field<std::string>(l.at("error_samples"), kind, file);
  if (l.contains("gpu") && l.at("gpu").is_object()) level.gpu = gpu_from(l.at("gpu"), file);
  if (l.contains("speculation") && l.at("speculation").is_object()) {
    const Json& s = l.at("speculation");
    level.speculation = SpeculationSummary{.num_drafts = json_field<int64_t>(s, "num_drafts", file),
                                           .draft_tokens = json_field<int64_t>(s, "draft_tokens", file),
                                           .accepted_tokens = json_field<int64_t>(s, "accepted_tokens", file)};
  }
  level.peak_in_flight = json_field_or<int>(l, "peak_in_flight", 0, file);
  level.client_cpu_seconds = json_field_or<double>(l, "client_cpu_seconds", 0, file);
  if (l.contains("classes") && l.at("classes").is_object())
    for (const auto& [name, c] : l.at("classes").items()) level.classes[name] = class_from(c, file);
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
          {"long_requests", r.long_requests},
          {"long_input_len", r.long_input_len},
          {"long_output_len", r.long_output_len},
          {"long_concurrency", r.long_concurrency},
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
  r.long_requests = json_field_or<int>(json, "long_requests", 0, file);
  r.long_input_len = json_field_or<int>(json, "long_input_len", 0, file);
  r.long_output_len = json_field_or<int>(json, "long_output_len", 0, file);
  r.long_concurrency = json_field_or<int>(json, "long_concurrency", 0, file);
  r.started_at = json_field_or<std::string>(json, "started_at", "", file);
  const Json& levels = json.contains("levels") ? json.at("levels") : Json();
  if (!levels.is_array()) throw Error(ErrorKind::kFormat, file.string() + ": field 'levels' expected an array");
  for (const Json& level : levels) r.levels.push_back(level_from(level, file));
  return r;
}

}  // namespace qinfer::loadgen
