#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/api_error.h"

namespace qinfer::server {
namespace {

using Json = nlohmann::ordered_json;

GenerationDefaults model_defaults() {
  GenerationDefaults defaults;
  defaults.temperature = 0.7;
  defaults.top_p = 0.8;
  defaults.top_k = 20;
  return defaults;
}

// The param an invalid body is refused with (empty when accepted).
std::string refused_param(const Json& body, ApiKind kind = ApiKind::kChat) {
  try {
    kind == ApiKind::kChat ? parse_chat_request(body, model_defaults())
                           : parse_completion_request(body, model_defaults());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().value_or("<none>");
  }
  return "";
}

Json chat(Json extra = Json::object()) {
  Json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(extra);
  return body;
}

TEST(OpenAiRequest, ChatFieldsAndModelDefaults) {
  CompletionWork w = parse_chat_request(chat(), model_defaults());
  EXPECT_FLOAT_EQ(w.generation.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(w.generation.sampling.top_p, 0.8f);
  EXPECT_EQ(w.generation.sampling.top_k, 20);
  EXPECT_FALSE(w.generation.max_tokens.has_value());
  EXPECT_FALSE(w.cacheable);

  w = parse_chat_request(chat({{"temperature", 0},
                               {"max_tokens", 5},
                               {"max_completion_tokens", 7},
                               {"stop", "x"},
                               {"seed", -1},
                               {"n", 2},
                               {"logprobs", true},
                               {"top_logprobs", 3},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               {"ignore_eos", true},
                               {"stop_token_ids", {5, 6}},
                               {"unknown_field", {1, 2}}}),
                         model_defaults());
  EXPECT_EQ(*w.generation.max_tokens, 7);
  EXPECT_EQ(w.generation.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(*w.generation.seed, ~uint64_t{0});
  EXPECT_EQ(w.generation.n, 2);
  EXPECT_EQ(w.generation.sampling.num_top_logprobs, 3);
  EXPECT_TRUE(w.stream && w.include_usage && w.generation.ignore_eos && w.cacheable);
  EXPECT_EQ(w.generation.stop_token_ids, (std::vector<int32_t>{5, 6}));
}

TEST(OpenAiRequest, MessagesAreNormalised) {
  CompletionWork w = parse_chat_request(
      chat({{"messages",
             {{{"role", "developer"}, {"content", "sys"}},
              {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
              {{"role", "assistant"},
               {"content", nullptr},
               {"tool_calls",
                {{{"id", "c1"},
                  {"type", "function"},
                  {"function", {{"name", "f"}, {"arguments", "{\"z\": 1, \"a\": 2}"}}}}}}},
              {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}}},
            {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}),
      model_defaults());
  const Json& m = w.chat.messages;
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "a\nb");
  EXPECT_EQ(m[2]["content"], "");  // null content is given to templates as ""
  // Arguments become an object, keeping the client's key order for the template's tojson.
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"].dump(), "{\"z\":1,\"a\":2}");
  EXPECT_EQ(m[3]["tool_call_id"], "c1");
  EXPECT_TRUE(w.parse_tool_calls);
  EXPECT_FALSE(parse_chat_request(chat({{"tools", {{{"function", {{"name", "f"}}}}}}, {"tool_choice", "none"}}),
                                  model_defaults())
                   .parse_tool_calls);
}

// tool_choice required / named: recorded for the tool-call grammar (output_constraint.h); parallel_tool_calls too.
TEST(OpenAiRequest, ForcedToolChoiceIsRecordedForTheToolCallGrammar) {
  const Json tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}}}},
                      {{"type", "function"}, {"function", {{"name", "say \"hi\""}}}}};
  CompletionWork required = parse_chat_request(chat({{"tools", tools}, {"tool_choice", "required"}}), model_defaults());
  EXPECT_EQ(required.tool_choice, "required");
  EXPECT_TRUE(required.parallel_tool_calls);
  EXPECT_TRUE(required.parse_tool_calls);
  CompletionWork named =
      parse_chat_request(chat({{"tools", tools},
                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "say \"hi\""}}}}},
                               {"parallel_tool_calls", false}}),
                         model_defaults());
  EXPECT_EQ(named.tool_choice, "function");
  EXPECT_EQ(named.forced_tool, "say \"hi\"");
  EXPECT_FALSE(named.parallel_tool_calls);
  EXPECT_EQ(named.chat.tools, tools);
  CompletionWork automatic = parse_chat_request(chat({{"tools", tools}, {"tool_choice", "auto"}}), model_defaults());
  EXPECT_EQ(automatic.tool_choice, "auto");
  CompletionWork none = parse_chat_request(chat({{"tools", tools}, {"tool_choice", "none"}}), model_defaults());
  EXPECT_TRUE(none.chat.tools.is_null());
  EXPECT_FALSE(none.parse_tool_calls);

  const Json loose = {{{"type", "function"}, {"function", {{"name", "f"}, {"strict", "yes"}}}}};
  EXPECT_EQ(refused_param(chat({{"tools", loose}})), "tools[0].function.strict");
  const Json bad_schema = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "object"}}}}};
  EXPECT_EQ(refused_param(chat({{"tools", bad_schema}})), "tools[0].function.parameters");
  EXPECT_EQ(refused_param(chat({{"tools", tools}, {"parallel_tool_calls", "no"}})), "parallel_tool_calls");
  EXPECT_EQ(
      refused_param(chat({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}})),
      "tool_choice");  // not one of the tools
  EXPECT_EQ(refused_param(chat({{"tools", tools}, {"tool_choice", {{"type", "function"}}}})), "tool_choice");
  EXPECT_EQ(refused_param(chat({{"tools", tools}, {"tool_choice", "required"}, {"add_generation_prompt", false}})),
            "tool_choice");
}

TEST(OpenAiRequest, BadFieldsNameTheParam) {
  EXPECT_EQ(refused_param(Json::array()), "<none>");
  EXPECT_EQ(refused_param({{"model", "m"}}), "messages");
  EXPECT_EQ(refused_param(chat({{"messages", Json::array()}})), "messages");
  EXPECT_EQ(refused_param(chat({{"messages", {{{"role", "user"}}}}})), "messages[0].content");
  EXPECT_EQ(refused_param(chat({{"messages", {{{"role", "x"}, {"content", "a"}}}}})), "messages[0].role");
  EXPECT_EQ(refused_param(chat({{"temperature", "0.5"}})), "temperature");
  EXPECT_EQ(refused_param(chat({{"max_tokens", 0}})), "max_tokens");
  EXPECT_EQ(refused_param(chat({{"max_tokens", 1.5}})), "max_tokens");
  EXPECT_EQ(refused_param(chat({{"n", 0}})), "n");
  EXPECT_EQ(refused_param(chat({{"n", kMaxSamplesPerRequest + 1}})), "n");
  EXPECT_EQ(refused_param({{"prompt", "a"}, {"best_of", kMaxSamplesPerRequest + 1}}, ApiKind::kCompletion), "best_of");
  EXPECT_EQ(refused_param(chat({{"priority", "high"}})), "priority");
  EXPECT_EQ(refused_param(chat({{"priority", 1.5}})), "priority");
  EXPECT_EQ(refused_param(chat({{"priority", 1LL << 40}})), "priority");
  EXPECT_EQ(refused_param(chat({{"stop", {1}}})), "stop");
  EXPECT_EQ(refused_param(chat({{"stream", "yes"}})), "stream");
  EXPECT_EQ(refused_param(chat({{"top_logprobs", 2}})), "top_logprobs");
  EXPECT_EQ(refused_param(chat({{"logprobs", true}, {"top_logprobs", 21}})), "top_logprobs");
  EXPECT_EQ(refused_param(chat({{"tools", {{{"type", "function"}}}}})), "tools[0]");
  EXPECT_EQ(refused_param(chat({{"tool_choice", "required"}})), "tool_choice");  // no tools
  EXPECT_EQ(refused_param(chat({{"tool_choice", "any"}})), "tool_choice");
  EXPECT_EQ(refused_param(chat({{"stop_token_ids", {-1}}})), "stop_token_ids");
  EXPECT_EQ(refused_param(chat({{"chat_template_kwargs", 3}})), "chat_template_kwargs");
  EXPECT_EQ(refused_param({{"prompt", 5}}, ApiKind::kCompletion), "prompt");
  EXPECT_EQ(refused_param({{"prompt", {"a", "b"}}}, ApiKind::kCompletion), "prompt");
  EXPECT_EQ(refused_param({{"prompt", "a"}, {"echo", true}}, ApiKind::kCompletion), "echo");
  EXPECT_EQ(refused_param({{"prompt", "a"}, {"logprobs", 21}}, ApiKind::kCompletion), "logprobs");
  EXPECT_EQ(refused_param(chat({{"temperature", nullptr}})), "");  // null means "not given"
}

TEST(OpenAiRequest, PriorityReachesTheEngineRequest) {
  EXPECT_EQ(parse_chat_request(chat(), model_defaults()).generation.priority, 0);
  EXPECT_EQ(parse_chat_request(chat({{"priority", -5}}), model_defaults()).generation.priority, -5);
  EXPECT_EQ(parse_completion_request({{"prompt", "a"}, {"priority", 9}}, model_defaults()).generation.priority, 9);
}

// The API's n limit is the engine's: a value the parser accepts is never refused later for its size.
TEST(OpenAiRequest, OneSampleLimit) {
  EXPECT_EQ(parse_chat_request(chat({{"n", kMaxSamplesPerRequest}}), model_defaults()).generation.n,
            kMaxSamplesPerRequest);
  try {
    parse_chat_request(chat({{"n", kMaxSamplesPerRequest + 1}}), model_defaults());
    ADD_FAILURE() << "n above the limit accepted";
  } catch (const ApiError& e) {
    EXPECT_STREQ(e.what(), "n must be in [1, 64], got 65");
  }
}

TEST(OpenAiRequest, CompletionPromptsAndDefaults) {
  CompletionWork text = parse_completion_request({{"prompt", {"hello"}}}, model_defaults());
  EXPECT_EQ(*text.prompt_text, "hello");
  EXPECT_EQ(*text.generation.max_tokens, 16);
  CompletionWork ids = parse_completion_request({{"prompt", {1, 2, 3}}, {"logprobs", 2}}, model_defaults());
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(ids.generation.logprobs);
  EXPECT_EQ(ids.generation.sampling.num_top_logprobs, 2);
}

TEST(OpenAiRequest, CacheKeyIgnoresDeliveryFieldsAndKeyOrder) {
  Json a = {{"prompt", "x"}, {"temperature", 0}, {"max_tokens", 3}};
  Json b = {{"max_tokens", 3}, {"stream", true}, {"temperature", 0}, {"prompt", "x"}, {"user", "u"}};
  EXPECT_EQ(parse_completion_request(a, model_defaults()).cache_key,
            parse_completion_request(b, model_defaults()).cache_key);
  Json c = {{"prompt", "x"}, {"temperature", 0}, {"max_tokens", 4}};
  EXPECT_NE(parse_completion_request(a, model_defaults()).cache_key,
            parse_completion_request(c, model_defaults()).cache_key);
}

}  // namespace
}  // namespace qinfer::server

namespace qinfer::server {
namespace {

// A tool loop as clients send it (assistant content null beside tool_calls, then the tool's result) renders with every
// shipped template.
TEST(OpenAiRequest, ToolLoopWithNullContentRendersWithEveryShippedTemplate) {
  const Json body = Json::parse(R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})");
  const CompletionWork work = parse_chat_request(body, model_defaults());
  const std::filesystem::path dir = std::filesystem::path(QINFER_SOURCE_DIR) / "tests/data/chat_templates";
  int rendered = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path());
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const ChatTemplate tmpl = ChatTemplate::from_source(source, "<s>", "</s>");
    std::string text;
    EXPECT_NO_THROW(text = tmpl.render(work.chat)) << entry.path();
    EXPECT_NE(text.find("Paris"), std::string::npos) << entry.path();
    ++rendered;
  }
  EXPECT_GE(rendered, 7);
}

}  // namespace
}  // namespace qinfer::server
