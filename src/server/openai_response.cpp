#include "server/openai_response.h"

#include <chrono>
#include <random>

namespace qinfer::server {
namespace {

nlohmann::json token_bytes_json(std::string_view bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (char c : bytes) out.push_back(static_cast<unsigned char>(c));
  return out;
}

}  // namespace

std::string random_id(const std::string& prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 generator(std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(generator)];
  return id;
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

nlohmann::json chat_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer) {
  nlohmann::json content = nlohmann::json::array();
  for (const TokenLogprobs& entry : logprobs) {
    std::string_view token = tokenizer.token_bytes(entry.token, false);
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& alternative : entry.top) {
      std::string_view text = tokenizer.token_bytes(alternative.token, false);
      top.push_back({{"token", text}, {"logprob", alternative.logprob}, {"bytes", token_bytes_json(text)}});
    }
    content.push_back(
        {{"token", token}, {"logprob", entry.logprob}, {"bytes", token_bytes_json(token)}, {"top_logprobs", top}});
  }
  return {{"content", std::move(content)}};
}

nlohmann::json completion_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer,
                                        size_t text_offset) {
  nlohmann::json tokens = nlohmann::json::array(), token_logprobs = nlohmann::json::array(),
                 top_logprobs = nlohmann::json::array(), offsets = nlohmann::json::array();
  for (const TokenLogprobs& entry : logprobs) {
    std::string_view token = tokenizer.token_bytes(entry.token, false);
    tokens.push_back(token);
    token_logprobs.push_back(entry.logprob);
    nlohmann::json top = nlohmann::json::object();
    for (const TokenLogprob& alternative : entry.top)
      top[std::string(tokenizer.token_bytes(alternative.token, false))] = alternative.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += token.size();
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

nlohmann::json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool with_index, size_t first_index) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json call = {{"id", random_id("call_")},
                           {"type", "function"},
                           {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = first_index + i;
    out.push_back(std::move(call));
  }
  return out;
}

std::string openai_finish_reason(FinishReason reason, bool made_tool_calls) {
  if (reason == FinishReason::kStop) return made_tool_calls ? "tool_calls" : "stop";
  if (reason == FinishReason::kLength) return "length";
  return "";
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::json& value) { return "data: " + dump_json(value) + "\n\n"; }

}  // namespace qinfer::server
