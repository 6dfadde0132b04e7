#include "backend/cuda/gemm_tuning_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/logging.h"

namespace qinfer::cuda {

namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;

nlohmann::json environment_json(const GemmTuningEnvironment& e) {
  return {{"gpu_name", e.gpu_name},
          {"compute_capability", e.compute_capability},
          {"driver_version", e.driver_version},
          {"cublaslt_version", e.cublaslt_version},
          {"workspace_bytes", e.workspace_bytes}};
}

// The entries of a file written for `environment`; nullopt (with the reason) when it is for another one or malformed.
std::optional<std::map<GemmShape, GemmAlgoWords>> parse_entries(const nlohmann::json& file,
                                                                const GemmTuningEnvironment& environment,
                                                                std::string& why) {
  if (!file.is_object() || file.value("format_version", 0) != kFormatVersion) {
    why = "another format version";
    return std::nullopt;
  }
  if (file.value("environment", nlohmann::json()) != environment_json(environment)) {
    why = "written for another GPU, driver or cuBLASLt";
    return std::nullopt;
  }
  std::map<GemmShape, GemmAlgoWords> entries;
  for (const nlohmann::json& entry : file.at("entries")) {
    GemmShape shape{.m = entry.at("m").get<int>(),
                    .n = entry.at("n").get<int>(),
                    .k = entry.at("k").get<int>(),
                    .y_fp32 = entry.at("y_fp32").get<bool>()};
    const nlohmann::json& words = entry.at("algo");
    GemmAlgoWords algo{};
    if (!words.is_array() || words.size() != algo.size()) {
      why = "an entry's algo is not 8 words";
      return std::nullopt;
    }
    for (size_t i = 0; i < algo.size(); ++i) algo[i] = std::stoull(words[i].get<std::string>(), nullptr, 16);
    entries[shape] = algo;
  }
  return entries;
}

}  // namespace

std::string GemmTuningCache::file_name(const GemmTuningEnvironment& environment) {
  const std::string text = environment_json(environment).dump();
  return fmt::format("gemm-tuning-{:016x}.json", XXH3_64bits(text.data(), text.size()));
}

GemmTuningCache::GemmTuningCache(const fs::path& directory, GemmTuningEnvironment environment)
    : environment_(std::move(environment)) {
  if (directory.empty()) return;
  path_ = directory / file_name(environment_);
  std::ifstream in(path_);
  if (!in) return;
  std::string why;
  try {
    const nlohmann::json file = nlohmann::json::parse(in);
    if (auto entries = parse_entries(file, environment_, why)) entries_ = std::move(*entries);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty()) {
    spdlog::warn("GEMM tuning cache {}: ignored ({}); it is rewritten after tuning", path_.string(), why);
    changed_ = true;
  }
}

std::optional<GemmAlgoWords> GemmTuningCache::find(const GemmShape& shape) const {
  auto it = entries_.find(shape);
  return it == entries_.end() ? std::nullopt : std::optional(it->second);
}

void GemmTuningCache::store(const GemmShape& shape, const GemmAlgoWords& algo) {
  auto [it, inserted] = entries_.try_emplace(shape, algo);
  if (!inserted && it->second == algo) return;
  it->second = algo;
  changed_ = true;
}

void GemmTuningCache::erase(const GemmShape& shape) { changed_ |= entries_.erase(shape) > 0; }

void GemmTuningCache::save() {
  if (!enabled() || !changed_) return;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [shape, algo] : entries_) {
    nlohmann::json words = nlohmann::json::array();
    for (uint64_t word : algo) words.push_back(fmt::format("{:016x}", word));
    entries.push_back({{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"y_fp32", shape.y_fp32}, {"algo", words}});
  }
  const nlohmann::json file = {
      {"format_version", kFormatVersion}, {"environment", environment_json(environment_)}, {"entries", entries}};
  const fs::path temporary = path_.string() + fmt::format(".tmp{}", getpid());
  std::error_code ec;
  fs::create_directories(path_.parent_path(), ec);
  if (!ec) {
    std::ofstream out(temporary);
    out << file.dump(1) << "\n";
    if (!out) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(temporary, path_, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    spdlog::warn("GEMM tuning cache {}: not saved ({}); the next start tunes again", path_.string(), ec.message());
    return;
  }
  changed_ = false;
}

}  // namespace qinfer::cuda
