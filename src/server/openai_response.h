// JSON pieces of OpenAI responses: ids, usage, logprobs, tool calls, SSE framing. Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::server {

// "chatcmpl-…", "cmpl-…", "call_…": a prefix and 24 random alphanumerics.
std::string random_id(const std::string& prefix);
int64_t unix_time_now();

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(const Usage& usage);

// Chat shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::json chat_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer);
// Legacy completions shape: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
// `text_offset` is the byte offset of the first token within the choice's text.
nlohmann::json completion_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer,
                                        size_t text_offset);

// [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}]; `first_index` numbers them in streams.
nlohmann::json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool with_index, size_t first_index);

// The OpenAI finish_reason for an engine finish ("stop" becomes "tool_calls" when the choice made calls); empty for
// endings OpenAI has no value for (abort, deadline, error), which the response reports as an error instead.
std::string openai_finish_reason(FinishReason reason, bool made_tool_calls);

// JSON text for the wire: invalid UTF-8 (e.g. a logprob token that is half a character) becomes U+FFFD.
std::string dump_json(const nlohmann::json& value);
// One SSE event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace qinfer::server
