#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace qinfer::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr int32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's legacy /v1/completions default
constexpr size_t kMaxMessages = 4096;

std::string type_name(const Json& value) { return value.type_name(); }

// The field's value, or nullptr when absent or null (OpenAI treats null as "not given").
const Json* find(const Json& body, const std::string& name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number_field(const Json& body, const std::string& name) {
  const Json* value = find(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) throw invalid_field(name, name + " must be a number, got " + type_name(*value));
  double number = value->get<double>();
  if (!std::isfinite(number)) throw invalid_field(name, name + " must be finite");
  return number;
}

std::optional<int64_t> integer_field(const Json& body, const std::string& name, int64_t min, int64_t max) {
  const Json* value = find(body, name);
  if (!value) return std::nullopt;
  int64_t number = 0;
  if (value->is_number_integer()) {
    if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(max))
      throw invalid_field(name, name + " must be at most " + std::to_string(max));
    number = value->get<int64_t>();
  } else if (value->is_number_float() && std::trunc(value->get<double>()) == value->get<double>() &&
             std::abs(value->get<double>()) < 9e15) {
    number = static_cast<int64_t>(value->get<double>());
  } else {
    throw invalid_field(name, name + " must be an integer, got " + value->dump());
  }
  if (number < min || number > max)
    throw invalid_field(name, name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                                  std::to_string(number));
  return number;
}

std::optional<bool> bool_field(const Json& body, const std::string& name) {
  const Json* value = find(body, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) throw invalid_field(name, name + " must be a boolean, got " + type_name(*value));
  return value->get<bool>();
}

std::optional<std::string> string_field(const Json& body, const std::string& name) {
  const Json* value = find(body, name);
  if (!value) return std::nullopt;
  if (!value->is_string()) throw invalid_field(name, name + " must be a string, got " + type_name(*value));
  return value->get<std::string>();
}

void require_object(const Json& body) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object, got " + type_name(body));
}

// Text of a message's content: a string, or text parts joined by newlines (as vLLM joins them).
std::string content_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_field(param, param + " must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_param = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw invalid_field(part_param, part_param + " must be an object with a string 'type'");
    const std::string& type = part["type"].get_ref<const std::string&>();
    if (type != "text")
      throw invalid_field(part_param, part_param + ": content parts of type '" + type +
                                          "' are not supported (text only: this is a text model)");
    if (!part.contains("text") || !part["text"].is_string())
      throw invalid_field(part_param + ".text", part_param + ".text must be a string");
    if (i) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

// Tool-call arguments arrive as a JSON string; templates expect an object (HF passes dicts), so parse when possible.
Json normalized_tool_calls(const Json& calls, const std::string& param) {
  if (!calls.is_array()) throw invalid_field(param, param + " must be an array");
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_param = param + "[" + std::to_string(i) + "]";
    const Json& call = calls[i];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      throw invalid_field(call_param, call_param + " must be an object with a 'function' object");
    Json function = call["function"];
    if (!function.contains("name") || !function["name"].is_string())
      throw invalid_field(call_param + ".function.name", call_param + ".function.name must be a string");
    if (function.contains("arguments") && function["arguments"].is_string()) {
      Json parsed = Json::parse(function["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded()) function["arguments"] = std::move(parsed);
    }
    Json normalized = call;
    normalized["function"] = std::move(function);
    out.push_back(std::move(normalized));
  }
  return out;
}

Json parse_messages(const Json& body) {
  const Json* messages = find(body, "messages");
  if (!messages) throw invalid_field("messages", "messages is required");
  if (!messages->is_array() || messages->empty())
    throw invalid_field("messages", "messages must be a non-empty array of message objects");
  if (messages->size() > kMaxMessages)
    throw invalid_field("messages", "at most " + std::to_string(kMaxMessages) + " messages are accepted");
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!message.is_object()) throw invalid_field(param, param + " must be an object");
    std::optional<std::string> role = string_field(message, "role");
    if (!role) throw invalid_field(param + ".role", param + ".role is required");
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
      throw invalid_field(param + ".role",
                          param + ".role must be system, developer, user, assistant or tool, got '" + *role + "'");
    Json normalized = {{"role", *role}};
    const Json* content = find(message, "content");
    if (content) {
      normalized["content"] = content_text(*content, param + ".content");
    } else if (*role == "assistant") {
      // `content: null` beside tool_calls (what OpenAI and qinfer return) as "": some shipped templates test
      // `'</think>' in message.content`, which fails on None, and none renders "" differently from None.
      normalized["content"] = "";
    } else {
      throw invalid_field(param + ".content", param + ".content is required for role " + *role);
    }
    if (const Json* calls = find(message, "tool_calls"))
      normalized["tool_calls"] = normalized_tool_calls(*calls, param + ".tool_calls");
    for (const char* name : {"name", "tool_call_id", "reasoning_content"})
      if (std::optional<std::string> value = string_field(message, name)) normalized[name] = *value;
    out.push_back(std::move(normalized));
  }
  return out;
}

Json parse_tools(const Json& body) {
  const Json* tools = find(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) throw invalid_field("tools", "tools must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object())
      throw invalid_field(param, param + " must be {\"type\": \"function\", \"function\": {...}}");
    if (tool.contains("type") && tool["type"] != "function")
      throw invalid_field(param + ".type", param + ".type must be \"function\"");
    if (!tool["function"].contains("name") || !tool["function"]["name"].is_string())
      throw invalid_field(param + ".function.name", param + ".function.name must be a string");
    const Json& function = tool["function"];
    if (function.contains("strict") && !function["strict"].is_null() && !function["strict"].is_boolean())
      throw invalid_field(param + ".function.strict", param + ".function.strict must be a boolean");
    if (function.contains("parameters") && !function["parameters"].is_null() && !function["parameters"].is_object())
      throw invalid_field(param + ".function.parameters", param + ".function.parameters must be a JSON Schema object");
  }
  return tools->empty() ? Json(nullptr) : *tools;
}

std::vector<std::string> parse_stop(const Json& body) {
  const Json* stop = find(body, "stop");
  if (!stop) return {};
  if (stop->is_string()) return {stop->get<std::string>()};
  if (!stop->is_array()) throw invalid_field("stop", "stop must be a string or an array of strings");
  std::vector<std::string> out;
  for (const Json& item : *stop) {
    if (!item.is_string()) throw invalid_field("stop", "stop must be a string or an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<int32_t> parse_id_array(const Json& value, const std::string& param) {
  if (!value.is_array()) throw invalid_field(param, param + " must be an array of token ids");
  std::vector<int32_t> ids;
  for (const Json& item : value) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT32_MAX)
      throw invalid_field(param, param + " must contain non-negative integer token ids, got " + item.dump());
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return ids;
}

// tool_choice: "auto" (default), "none" (tools left out of the prompt, nothing parsed), "required", or
// {"type": "function", "function": {"name": N}} with N one of `tools`. The last two are generated under a tool-call
// grammar (output_constraint.h), as are calls to tools with strict: true.
void parse_tool_choice(const Json& body, const Json& tools, CompletionWork& work) {
  const Json* choice = find(body, "tool_choice");
  const std::string expected =
      R"(tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}})";
  std::optional<std::string> forced_name;
  std::string mode = "auto";
  if (choice && choice->is_string()) {
    mode = choice->get<std::string>();
    if (mode != "auto" && mode != "none" && mode != "required") throw invalid_field("tool_choice", expected);
  } else if (choice) {
    const Json* function = choice->is_object() ? find(*choice, "function") : nullptr;
    const Json* name = function && function->is_object() ? find(*function, "name") : nullptr;
    if (!name || !name->is_string() || (choice->contains("type") && (*choice)["type"] != "function"))
      throw invalid_field("tool_choice", expected + ", got " + choice->dump());
    forced_name = name->get<std::string>();
    mode = "function";
  }
  if (mode != "auto" && mode != "none" && tools.is_null())
    throw invalid_field("tool_choice", "tool_choice \"" + mode + "\" needs a non-empty tools list");
  if (forced_name && std::none_of(tools.begin(), tools.end(),
                                  [&](const Json& tool) { return tool["function"]["name"] == *forced_name; }))
    throw invalid_field("tool_choice", "tool_choice names the function '" + *forced_name + "', which is not in tools");
  if (mode == "none") return;
  work.chat.tools = tools;
  work.parse_tool_calls = !tools.is_null();
  work.tool_choice = mode;
  if (forced_name) work.forced_tool = *forced_name;
  work.parallel_tool_calls = bool_field(body, "parallel_tool_calls").value_or(true);
}

void parse_template_options(const Json& body, ChatTemplateInputs& chat) {
  chat.add_generation_prompt = bool_field(body, "add_generation_prompt").value_or(true);
  if (const Json* kwargs = find(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw invalid_field("chat_template_kwargs", "chat_template_kwargs must be an object");
    chat.extra_kwargs = *kwargs;
  }
}

// Fields shared by both endpoints: sampling, limits, stop conditions, streaming.
void parse_common(const Json& body, const GenerationDefaults& defaults, CompletionWork& work) {
  work.model = string_field(body, "model");
  SamplingParams& s = work.generation.sampling;
  s.temperature = static_cast<float>(number_field(body, "temperature").value_or(defaults.temperature));
  s.top_p = static_cast<float>(number_field(body, "top_p").value_or(defaults.top_p));
  s.top_k = static_cast<int>(integer_field(body, "top_k", -1, INT32_MAX).value_or(defaults.top_k));
  s.min_p = static_cast<float>(number_field(body, "min_p").value_or(defaults.min_p));
  s.repetition_penalty =
      static_cast<float>(number_field(body, "repetition_penalty").value_or(defaults.repetition_penalty));
  s.presence_penalty = static_cast<float>(number_field(body, "presence_penalty").value_or(0.0));
  s.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty").value_or(0.0));
  if (std::optional<int64_t> seed =
          integer_field(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    work.generation.seed = static_cast<uint64_t>(*seed);
  work.generation.n = static_cast<int32_t>(integer_field(body, "n", 1, kMaxSamplesPerRequest).value_or(1));
  // vLLM's extension: lower is served first under --scheduling-policy priority; the engine refuses non-zero otherwise.
  work.generation.priority = static_cast<int32_t>(
      integer_field(body, "priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())
          .value_or(0));
  work.generation.stop = parse_stop(body);
  if (const Json* ids = find(body, "stop_token_ids"))
    work.generation.stop_token_ids = parse_id_array(*ids, "stop_token_ids");
  work.generation.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  work.structured_output = parse_structured_output(body);
  work.generation.logit_bias = parse_logit_bias(body);
  work.stream = bool_field(body, "stream").value_or(false);
  if (const Json* options = find(body, "stream_options")) {
    if (!options->is_object()) throw invalid_field("stream_options", "stream_options must be an object");
    work.include_usage = bool_field(*options, "include_usage").value_or(false);
  }
  Json key = body;
  for (const char* name : {"stream", "stream_options", "user"}) key.erase(name);
  // Re-parsed into the sorted json type so that key order does not split cache entries.
  work.cache_key = nlohmann::json::parse(key.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)).dump();
  work.cacheable = s.greedy() || work.generation.seed.has_value();
}

}  // namespace

CompletionWork parse_chat_request(const Json& body, const GenerationDefaults& defaults) {
  require_object(body);
  CompletionWork work;
  work.kind = ApiKind::kChat;
  work.chat.messages = parse_messages(body);
  parse_common(body, defaults, work);
  std::optional<int64_t> max_tokens = integer_field(body, "max_completion_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = integer_field(body, "max_tokens", 1, INT32_MAX);
  if (max_tokens) work.generation.max_tokens = static_cast<int32_t>(*max_tokens);
  work.generation.logprobs = bool_field(body, "logprobs").value_or(false);
  if (std::optional<int64_t> top = integer_field(body, "top_logprobs", 0, 20)) {
    if (!work.generation.logprobs) throw invalid_field("top_logprobs", "top_logprobs needs logprobs: true");
    work.generation.sampling.num_top_logprobs = static_cast<int>(*top);
  }
  parse_tool_choice(body, parse_tools(body), work);
  parse_template_options(body, work.chat);
  if ((work.tool_choice == "required" || work.tool_choice == "function") && !work.chat.add_generation_prompt)
    throw invalid_field("tool_choice", "a required or named tool_choice needs add_generation_prompt: true");
  return work;
}

CompletionWork parse_completion_request(const Json& body, const GenerationDefaults& defaults) {
  require_object(body);
  CompletionWork work;
  work.kind = ApiKind::kCompletion;
  const Json* prompt = find(body, "prompt");
  if (!prompt) throw invalid_field("prompt", "prompt is required");
  // One prompt per request: a string, token ids, or a one-element list of either.
  const Json* single = prompt;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    single = &(*prompt)[0];
  if (single->is_string()) {
    work.prompt_text = single->get<std::string>();
  } else if (single->is_array() && !single->empty() && (*single)[0].is_number()) {
    work.prompt_ids = parse_id_array(*single, "prompt");
  } else {
    throw invalid_field("prompt",
                        "prompt must be a string or an array of token ids (batches of several prompts are not "
                        "supported: send one request per prompt)");
  }
  parse_common(body, defaults, work);
  work.generation.max_tokens =
      static_cast<int32_t>(integer_field(body, "max_tokens", 1, INT32_MAX).value_or(kDefaultCompletionMaxTokens));
  if (std::optional<int64_t> logprobs = integer_field(body, "logprobs", 0, 20)) {
    work.generation.logprobs = true;
    work.generation.sampling.num_top_logprobs = static_cast<int>(*logprobs);
  }
  if (bool_field(body, "echo").value_or(false)) throw invalid_field("echo", "echo is not supported");
  if (integer_field(body, "best_of", 1, kMaxSamplesPerRequest).value_or(work.generation.n) != work.generation.n)
    throw invalid_field("best_of", "best_of other than n is not supported");
  if (find(body, "suffix")) throw invalid_field("suffix", "suffix is not supported");
  return work;
}

TokenizeWork parse_tokenize_request(const Json& body) {
  require_object(body);
  TokenizeWork work;
  work.add_special_tokens = bool_field(body, "add_special_tokens").value_or(true);
  if (find(body, "prompt")) {
    work.prompt = string_field(body, "prompt");
    return work;
  }
  if (!find(body, "messages")) throw invalid_field("prompt", "give either prompt or messages");
  work.chat.messages = parse_messages(body);
  work.chat.tools = parse_tools(body);
  parse_template_options(body, work.chat);
  return work;
}

std::vector<int32_t> parse_detokenize_request(const Json& body, int32_t vocab_size) {
  require_object(body);
  const Json* tokens = find(body, "tokens");
  if (!tokens) throw invalid_field("tokens", "tokens is required");
  std::vector<int32_t> ids = parse_id_array(*tokens, "tokens");
  for (int32_t id : ids)
    if (id >= vocab_size)
      throw invalid_field("tokens", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                        std::to_string(vocab_size) + ")");
  return ids;
}

}  // namespace qinfer::server
