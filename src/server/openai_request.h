// OpenAI request bodies → typed, validated work for the engine. Parsing only: no tokenization, no engine calls.
// Unknown fields are ignored; a known field with a wrong type or value throws ApiError 400 naming it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "engine/request.h"
#include "model/config.h"
#include "server/structured_output_request.h"

namespace qinfer::server {

enum class ApiKind { kChat, kCompletion };

struct CompletionWork {
  ApiKind kind = ApiKind::kChat;
  std::optional<std::string> model;        // as the client named it
  ChatTemplateInputs chat;                 // kChat: messages, tools, add_generation_prompt, chat_template_kwargs
  std::optional<std::string> prompt_text;  // kCompletion: a text prompt ...
  std::vector<int32_t> prompt_ids;         // ... or token ids
  GenerationRequest generation;            // everything but prompt, deadline and on_output
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool parse_tool_calls = false;
  // tool_choice: "auto", "none", "required" or "function" (a named one: forced_tool). "required" and "function", and
  // tools with strict: true under "auto", generate their calls under a tool-call grammar (output_constraint.h).
  std::string tool_choice = "auto";
  std::string forced_tool;
  bool parallel_tool_calls = true;
  // --reasoning-parser (chat only): <think>...</think> goes to reasoning_content; prompt_opens_reasoning when the
  // rendered prompt already opened it (set by the handler).
  bool parse_reasoning = false;
  bool prompt_opens_reasoning = false;
  // response_format / structured_outputs / guided_*: compiled by the handler into generation.constraint.
  std::optional<StructuredOutput> structured_output;
  // The body without per-delivery fields (stream, stream_options, user), sorted: the response-cache key.
  std::string cache_key;
  bool cacheable = false;  // greedy or seeded
};

CompletionWork parse_chat_request(const nlohmann::ordered_json& body, const GenerationDefaults& defaults);
CompletionWork parse_completion_request(const nlohmann::ordered_json& body, const GenerationDefaults& defaults);

// /tokenize: either `prompt` (a string) or `messages` (+ add_generation_prompt, tools, chat_template_kwargs).
struct TokenizeWork {
  std::optional<std::string> prompt;
  ChatTemplateInputs chat;
  bool add_special_tokens = true;
};
TokenizeWork parse_tokenize_request(const nlohmann::ordered_json& body);

// /detokenize: {"tokens": [ids]}.
std::vector<int32_t> parse_detokenize_request(const nlohmann::ordered_json& body, int32_t vocab_size);

}  // namespace qinfer::server
