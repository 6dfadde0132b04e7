// --speculative-config: vLLM's JSON object ('{"method": "ngram", "num_speculative_tokens": 4,
// "prompt_lookup_max": 4, "prompt_lookup_min": 1}') as the engine's SpeculativeConfig.
#pragma once

#include <string>

#include "engine/speculation.h"

namespace qinfer::cli {

// Empty text: no speculation. Throws Error(kInvalidArgument) naming the key for malformed JSON, an unknown method or
// key, a value out of range, and the draft_model method (not available yet); the message leaves the flag's name to
// the caller.
SpeculativeConfig parse_speculative_config(const std::string& json_text);

}  // namespace qinfer::cli
