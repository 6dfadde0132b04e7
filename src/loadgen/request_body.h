// The JSON body of one benchmark request: streamed, with usage in the stream, exactly max_tokens output tokens
// (ignore_eos, which vLLM and qinfer honour) and greedy sampling so runs are repeatable.
#pragma once

#include <string>

#include "loadgen/workload.h"

namespace qinfer::loadgen {

struct RequestShape {
  std::string model;
  bool chat = false;  // /v1/chat/completions (prompt as one user message) instead of /v1/completions
  int output_len = 128;
};

std::string request_body(const RequestShape& shape, const PromptSpec& prompt);

}  // namespace qinfer::loadgen
