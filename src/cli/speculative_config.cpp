#include "cli/speculative_config.h"

#include <algorithm>
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

SpeculativeConfig parse_speculative_config(const std::string& json_text) {
  SpeculativeConfig result;
  if (json_text.empty()) return result;
  const nlohmann::json config = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) invalid("not valid JSON: " + json_text);
  if (!config.is_object())
    invalid("expected a JSON object such as '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
  auto method = config.find("method");
  if (method == config.end() || !method->is_string()) invalid("method must be given as a string: \"ngram\"");
  const std::string name = method->get<std::string>();
  if (name == "draft_model")
    invalid("method draft_model is not supported yet; the available method is \"ngram\" (prompt lookup)");
  if (name != "ngram") invalid("unknown method '" + name + "' (known: ngram)");
  for (const auto& [key, value] : config.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "disable_by_batch_size")
      invalid("unknown key '" + key +
              "' (known: method, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, disable_by_batch_size)");
  result.method = SpeculativeMethod::kNgram;
  if (!config.contains("num_speculative_tokens")) invalid("num_speculative_tokens is required");
  result.num_speculative_tokens = integer(config, "num_speculative_tokens", 1, kMaxSpeculativeTokens, 0);
  // A bound given alone keeps the other's default, unless they would cross: a lone minimum above 4 raises the maximum.
  const bool has_max = config.contains("prompt_lookup_max");
  result.prompt_lookup_max = integer(config, "prompt_lookup_max", 1, 1024, result.prompt_lookup_max);
  result.prompt_lookup_min = integer(config, "prompt_lookup_min", 1, 1024, result.prompt_lookup_min);
  if (!has_max) result.prompt_lookup_max = std::max(result.prompt_lookup_min, result.prompt_lookup_max);
  if (result.prompt_lookup_min > result.prompt_lookup_max)
    invalid("prompt_lookup_min (" + std::to_string(result.prompt_lookup_min) + ") must not exceed prompt_lookup_max (" +
            std::to_string(result.prompt_lookup_max) + ")");
  result.disable_by_batch_size = integer(config, "disable_by_batch_size", 0, 1 << 20, result.disable_by_batch_size);
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
