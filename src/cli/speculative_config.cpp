#include "cli/speculative_config.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace qinfer::cli {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorKind::kInvalidArgument, message); }

// An integer key in [low, high], or `fallback` when absent.
int32_t integer(const nlohmann::json& config, const char* key, int32_t low, int32_t high, int32_t fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) invalid(std::string(key) + " must be an integer, got " + it->dump());
  const int64_t value = it->get<int64_t>();
  if (value < low || value > high)
    invalid(std::string(key) + " must be in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " +
            std::to_string(value));
  return static_cast<int32_t>(value);
}

}  // namespace

namespace {

// A string key, or "" when absent.
std::string text(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (!it->is_string()) invalid(std::string(key) + " must be a string, got " + it->dump());
  return it->get<std::string>();
}

void refuse_unknown_keys(const nlohmann::json& config, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : config.items())
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) == known.end()) {
      std::string names;
      for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      invalid("unknown key '" + key + "' (known: " + names + ")");
    }
}

}  // namespace

SpeculativeConfig parse_speculative_config(const std::string& json_text) {
  SpeculativeConfig result;
  if (json_text.empty()) return result;
  const nlohmann::json config = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) invalid("not valid JSON: " + json_text);
  if (!config.is_object())
    invalid("expected a JSON object such as '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
  // vLLM takes the draft as "model" (older releases: "speculative_model") and infers draft_model from it.
  const bool has_model = config.contains("model") || config.contains("speculative_model");
  auto method = config.find("method");
  if ((method == config.end() || method->is_null()) && !has_model)
    invalid("method must be given as a string: \"ngram\" or \"draft_model\"");
  if (method != config.end() && !method->is_null() && !method->is_string())
    invalid("method must be a string: \"ngram\" or \"draft_model\"");
  const std::string name = method != config.end() && method->is_string() ? method->get<std::string>() : "draft_model";
  if (name == "ngram") {
    refuse_unknown_keys(config, {"method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max",
                                 "disable_by_batch_size"});
    result.method = SpeculativeMethod::kNgram;
  } else if (name == "draft_model") {
    refuse_unknown_keys(
        config, {"method", "model", "speculative_model", "config", "num_speculative_tokens", "disable_by_batch_size"});
    if (config.contains("model") && config.contains("speculative_model"))
      invalid("give the draft as one of model and speculative_model, not both");
    result.method = SpeculativeMethod::kDraftModel;
    result.draft_model = text(config, config.contains("model") ? "model" : "speculative_model");
    result.draft_config = text(config, "config");
    if (result.draft_model.empty())
      invalid(
          "method draft_model needs \"model\": the draft checkpoint (a directory or ORG/NAME; with "
          "--load-format dummy also a config.json, its directory or a test-model preset)");
  } else {
    invalid("unknown method '" + name + "' (known: ngram, draft_model)");
  }
  if (!config.contains("num_speculative_tokens")) invalid("num_speculative_tokens is required");
  result.num_speculative_tokens = integer(config, "num_speculative_tokens", 1, kMaxSpeculativeTokens, 0);
  result.disable_by_batch_size = integer(config, "disable_by_batch_size", 0, 1 << 20, result.disable_by_batch_size);
  if (result.method != SpeculativeMethod::kNgram) return result;
  // A bound given alone keeps the other's default, unless they would cross: a lone minimum above 4 raises the maximum.
  const bool has_max = config.contains("prompt_lookup_max");
  result.prompt_lookup_max = integer(config, "prompt_lookup_max", 1, 1024, result.prompt_lookup_max);
  result.prompt_lookup_min = integer(config, "prompt_lookup_min", 1, 1024, result.prompt_lookup_min);
  if (!has_max) result.prompt_lookup_max = std::max(result.prompt_lookup_min, result.prompt_lookup_max);
  if (result.prompt_lookup_min > result.prompt_lookup_max)
    invalid("prompt_lookup_min (" + std::to_string(result.prompt_lookup_min) + ") must not exceed prompt_lookup_max (" +
            std::to_string(result.prompt_lookup_max) + ")");
  return result;
}

nlohmann::json speculation_stats_json(const SpeculationStats& stats) {
  const double rate =
      stats.draft_tokens > 0 ? static_cast<double>(stats.accepted_tokens) / static_cast<double>(stats.draft_tokens) : 0;
  return {{"num_drafts", stats.verifications},
          {"draft_tokens", stats.draft_tokens},
          {"accepted_tokens", stats.accepted_tokens},
          {"accepted_per_position", stats.accepted_per_position},
          {"acceptance_rate", rate},
          {"mean_accepted_length", stats.mean_accepted_length()}};
}

}  // namespace qinfer::cli
