// The JSON body of one benchmark request: streamed, with usage in the stream, exactly max_tokens output tokens
// (ignore_eos, which vLLM and qinfer honour) and greedy sampling so runs are repeatable.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "loadgen/workload.h"

namespace qinfer::loadgen {

struct RequestShape {
  std::string model;
  bool chat = false;  // /v1/chat/completions (prompt as one user message) instead of /v1/completions
  int output_len = 128;
  // Fields merged into every body last (--extra-body), e.g. a response_format: a JSON object, or null for none.
  nlohmann::json extra_body = nullptr;
};

std::string request_body(const RequestShape& shape, const PromptSpec& prompt);

}  // namespace qinfer::loadgen
