#include "engine/request_validation.h"

#include <optional>
#include <string>

#include "util/error.h"

namespace qinfer {
namespace {

// `field` is the GenerationRequest field at fault, in the OpenAI request's spelling (the server sends it as `param`).
[[noreturn]] void refuse(const char* field, const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message, field);
}

constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 256;

}  // namespace

int64_t blocks_for_samples(int64_t prompt_tokens, int64_t total_tokens, int64_t n, int32_t block_size) {
  int64_t shared = (prompt_tokens - 1) / block_size;  // full prompt blocks, minus the one holding the last token
  int64_t per_sample = (total_tokens + block_size - 1) / block_size - shared;
  return shared + n * per_sample;
}

int32_t validate_request(const GenerationRequest& request, const RequestLimits& limits) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  if (prompt_len == 0) refuse("prompt", "prompt is empty: at least one token is needed");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= limits.vocab_size)
      refuse("prompt", "prompt token " + std::to_string(i) + " has id " + std::to_string(request.prompt[i]) +
                           ", outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
  if (prompt_len >= limits.max_model_len)
    refuse("prompt", "prompt has " + std::to_string(prompt_len) + " tokens; max_model_len is " +
                         std::to_string(limits.max_model_len) + ", which leaves no room to generate");
  if (limits.max_prompt_tokens > 0 && prompt_len > limits.max_prompt_tokens)
    refuse("prompt", "prompt has " + std::to_string(prompt_len) + " tokens; this server accepts at most " +
                         std::to_string(limits.max_prompt_tokens) + " (max_input_tokens)");
  int64_t room = limits.max_model_len - prompt_len;
  if (request.max_tokens && (*request.max_tokens < 1 || *request.max_tokens > room))
    refuse("max_tokens", "max_tokens must be in [1, " + std::to_string(room) + "] (max_model_len " +
                             std::to_string(limits.max_model_len) + " minus " + std::to_string(prompt_len) +
                             " prompt tokens), got " + std::to_string(*request.max_tokens));
  int32_t max_tokens = request.max_tokens ? *request.max_tokens : static_cast<int32_t>(room);
  if (request.n < 1 || request.n > kMaxSamplesPerRequest)
    refuse("n", "n must be in [1, " + std::to_string(kMaxSamplesPerRequest) + "], got " + std::to_string(request.n));
  if (request.priority != 0 && !limits.priority_scheduling)
    refuse("priority",
           "priority " + std::to_string(request.priority) +
               " needs --scheduling-policy priority; under this server's policy only 0 (the default) is accepted");
  if (std::optional<Error> refused = request.sampling.validate(limits.vocab_size)) throw *refused;
  if (limits.max_logprobs >= 0 && request.logprobs && request.sampling.num_top_logprobs > limits.max_logprobs)
    refuse("top_logprobs", "top_logprobs: " + std::to_string(request.sampling.num_top_logprobs) +
                               " requested, this server allows at most " + std::to_string(limits.max_logprobs) +
                               " (max_logprobs)");
  for (int32_t id : request.stop_token_ids)
    if (id < 0 || id >= limits.vocab_size)
      refuse("stop_token_ids", "stop_token_ids contains " + std::to_string(id) + ", outside the vocabulary [0, " +
                                   std::to_string(limits.vocab_size) + ")");
  if (!request.stop.empty() && !limits.has_text_decoder)
    refuse("stop", "stop strings need a tokenizer; this engine runs without one");
  if (request.stop.size() > kMaxStopStrings)
    refuse("stop", "stop: at most " + std::to_string(kMaxStopStrings) + " stop strings, got " +
                       std::to_string(request.stop.size()));
  for (const std::string& stop : request.stop)
    if (stop.empty() || stop.size() > kMaxStopStringBytes)
      refuse("stop", "each stop string must have 1 to " + std::to_string(kMaxStopStringBytes) + " bytes, got " +
                         std::to_string(stop.size()));
  if (request.constraint && request.constraint->vocab().size() != limits.vocab_size)
    refuse("constraint", "the constraint was compiled for a vocabulary of " +
                             std::to_string(request.constraint->vocab().size()) + " ids, the model has " +
                             std::to_string(limits.vocab_size));
  const grammar::ConstraintScope& scope = request.constraint_scope;
  std::vector<int32_t> scope_ids = scope.triggers;
  for (int32_t id : {scope.span_open, scope.span_close})
    if (id != -1) scope_ids.push_back(id);
  for (int32_t id : scope_ids)
    if (id < 0 || id >= limits.vocab_size)
      refuse("constraint", "the constraint's scope names token id " + std::to_string(id) +
                               ", outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
  for (size_t i = 0; i < request.logit_bias.size(); ++i) {
    const LogitBias& b = request.logit_bias[i];
    if (b.token < 0 || b.token >= limits.vocab_size)
      refuse("logit_bias", "logit_bias has token id " + std::to_string(b.token) + ", outside the vocabulary [0, " +
                               std::to_string(limits.vocab_size) + ")");
    if (!(b.bias >= -100.0f && b.bias <= 100.0f))
      refuse("logit_bias", "logit_bias of token " + std::to_string(b.token) + " must be in [-100, 100], got " +
                               std::to_string(b.bias));
    for (size_t j = 0; j < i; ++j)
      if (request.logit_bias[j].token == b.token)
        refuse("logit_bias", "logit_bias lists token " + std::to_string(b.token) + " twice");
  }
  int64_t needed = blocks_for_samples(prompt_len, prompt_len + max_tokens, request.n, limits.block_size);
  // With one sample the output length is what to lower; with several, their number.
  if (needed > limits.num_blocks)
    refuse(request.n > 1 ? "n" : "max_tokens", "n = " + std::to_string(request.n) + " samples of up to " +
                                                   std::to_string(prompt_len + max_tokens) + " tokens need " +
                                                   std::to_string(needed) + " KV blocks at once; the cache has " +
                                                   std::to_string(limits.num_blocks) + " (lower n or max_tokens)");
  return max_tokens;
}

}  // namespace qinfer
