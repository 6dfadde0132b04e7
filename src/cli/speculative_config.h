// --speculative-config: vLLM's JSON object ('{"method": "ngram", "num_speculative_tokens": 4,
// "prompt_lookup_max": 4, "prompt_lookup_min": 1}', or '{"method": "draft_model", "model": DIR,
// "num_speculative_tokens": 4}') as the engine's SpeculativeConfig.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/speculation.h"

namespace qinfer::cli {

// Empty text: no speculation. Throws Error(kInvalidArgument) naming the key for malformed JSON, an unknown method or
// key (each method has its own), a value out of range, and draft_model without "model"; the message leaves the
// flag's name to the caller. The draft is given as "model" (vLLM's older "speculative_model" too; "method" may then be
// left out, as vLLM infers it) and, for dummy weights, its shape as "config" (a config.json).
SpeculativeConfig parse_speculative_config(const std::string& json_text);

// The counters as the benches report them: num_drafts, draft_tokens, accepted_tokens, accepted_per_position,
// acceptance_rate, mean_accepted_length.
nlohmann::json speculation_stats_json(const SpeculationStats& stats);

}  // namespace qinfer::cli
