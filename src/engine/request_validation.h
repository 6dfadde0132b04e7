// Submit-time checks: everything the engine refuses before a request reaches the scheduler, so that no request can
// later stall or crash the loop.
#pragma once

#include <cstdint>

#include "engine/request.h"

namespace qinfer {

struct RequestLimits {
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  bool has_text_decoder = false;
  int32_t max_logprobs = -1;         // -1: no limit of the engine's own
  int32_t max_prompt_tokens = 0;     // 0: max_model_len - 1
  bool priority_scheduling = false;  // --scheduling-policy priority: any priority; otherwise only 0 (as vLLM)
};

// Throws Error(kInvalidArgument) naming the field, the limit and the value. Returns max_tokens resolved against
// max_model_len.
int32_t validate_request(const GenerationRequest& request, const RequestLimits& limits);

// KV blocks that n samples of `total_tokens` each need at once when they share the prompt's full blocks.
int64_t blocks_for_samples(int64_t prompt_tokens, int64_t total_tokens, int64_t n, int32_t block_size);

}  // namespace qinfer
