// CompletionOutput on hand-made engine deltas: the streamed and non-streamed OpenAI shapes, tool calls in both modes.
#include "server/completion_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

namespace qinfer::server {
namespace {

using Json = nlohmann::json;

class CompletionOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto path = std::filesystem::path(QINFER_SOURCE_DIR) / ".assets/qwen3-tokenizer/tokenizer.json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run tools/fetch-test-assets.sh";
    tokenizer_.emplace(Tokenizer::from_file(path));
    work_.kind = ApiKind::kChat;
    work_.parse_tool_calls = true;
    work_.include_usage = true;
  }
  // The text pieces a model might stream, split inside the tags and inside the JSON.
  std::vector<StreamDelta> deltas() const {
    return deltas_of({"Checking", " now.\n<tool", "_call>\n{\"name\": \"get_",
                      "weather\", \"arguments\": {\"city\": \"Pa", "ris\"}}\n</tool_call>"});
  }
  // One delta per piece, one token each; the last one finishes with "stop".
  static std::vector<StreamDelta> deltas_of(const std::vector<std::string>& pieces) {
    std::vector<StreamDelta> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      StreamDelta d;
      d.token_ids = {static_cast<int32_t>(100 + i)};
      d.text = pieces[i];
      if (i + 1 == pieces.size()) d.finish_reason = FinishReason::kStop;
      out.push_back(d);
    }
    return out;
  }
  static CompletionOutput::Timing now_timing() {
    const auto now = std::chrono::steady_clock::now();
    return {now, 0.0, now, nullptr};
  }
  static std::vector<Json> events(const std::string& sse) {
    std::vector<Json> out;
    size_t pos = 0;
    while (pos < sse.size()) {
      size_t end = sse.find("\n\n", pos);
      EXPECT_EQ(sse.compare(pos, 6, "data: "), 0);
      std::string data = sse.substr(pos + 6, end - pos - 6);
      out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
      pos = end + 2;
    }
    return out;
  }

  std::optional<Tokenizer> tokenizer_;
  CompletionWork work_;
  ServerMetrics metrics_;
};

TEST_F(CompletionOutputTest, StreamedToolCallIsSentWholeAndNoTagTextLeaks) {
  CompletionOutput output(work_, "m", *tokenizer_, metrics_, now_timing());
  std::string sse;
  for (StreamDelta& delta : deltas()) {
    std::vector<StreamDelta> one = {delta};
    sse += output.stream_events(one);
  }
  Usage usage{10, 5, 0};
  sse += output.stream_end(usage);
  std::vector<Json> chunks = events(sse);
  ASSERT_EQ(chunks.back(), "[DONE]");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  std::string content, arguments, name, finish;
  int calls = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i]["object"], "chat.completion.chunk");
    for (const Json& choice : chunks[i]["choices"]) {
      const Json& delta = choice["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      if (delta.contains("tool_calls")) {
        for (const Json& call : delta["tool_calls"]) {
          ++calls;
          EXPECT_EQ(call["index"], 0);
          EXPECT_EQ(call["type"], "function");
          EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
          name = call["function"]["name"];
          arguments += call["function"]["arguments"].get<std::string>();
        }
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(content, "Checking now.\n");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(Json::parse(arguments), Json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");
  const Json& last = chunks[chunks.size() - 2];
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["total_tokens"], 15);
}

TEST_F(CompletionOutputTest, NonStreamedToolCall) {
  CompletionOutput output(work_, "m", *tokenizer_, metrics_, now_timing());
  std::vector<StreamDelta> all = deltas();
  output.absorb(all);
  Json response = output.final_response(Usage{10, 5, 3});
  EXPECT_EQ(response["object"], "chat.completion");
  const Json& message = response["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Checking now.\n");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_FALSE(message["tool_calls"][0].contains("index"));
  EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(response["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
}

TEST_F(CompletionOutputTest, DeadlineAndErrorsBecomeFailures) {
  CompletionOutput output(work_, "m", *tokenizer_, metrics_, now_timing());
  StreamDelta delta;
  delta.finish_reason = FinishReason::kDeadline;
  std::vector<StreamDelta> one = {delta};
  output.absorb(one);
  ASSERT_TRUE(output.failure());
  EXPECT_EQ(output.failure()->status(), 504);
}

// Streams carry only OpenAI finish reasons: a deadline, abort or error ends the choice without a finish chunk (the
// stream then gets an error event), while the metric label keeps the engine's reason.
TEST_F(CompletionOutputTest, StreamsCarryOnlyOpenAiFinishReasons) {
  work_.parse_tool_calls = false;
  const std::set<std::string> openai = {"stop", "length", "tool_calls", "content_filter", "function_call"};
  for (FinishReason ending : {FinishReason::kDeadline, FinishReason::kAbort, FinishReason::kError, FinishReason::kStop,
                              FinishReason::kLength}) {
    CompletionOutput output(work_, "m", *tokenizer_, metrics_, now_timing());
    std::vector<StreamDelta> all = deltas_of({"Hello", " there"});
    all.back().finish_reason = ending;
    const std::string events = output.stream_events(all);
    size_t finishes = 0;
    for (size_t at = events.find("data: "); at != std::string::npos; at = events.find("data: ", at + 1)) {
      const Json chunk = Json::parse(events.substr(at + 6, events.find("\n\n", at) - at - 6));
      for (const Json& choice : chunk["choices"])
        if (!choice["finish_reason"].is_null()) {
          EXPECT_TRUE(openai.count(choice["finish_reason"].get<std::string>())) << events;
          ++finishes;
        }
    }
    const bool openai_ending = ending == FinishReason::kStop || ending == FinishReason::kLength;
    EXPECT_EQ(finishes, openai_ending ? 1u : 0u) << events;
    EXPECT_EQ(output.failure().has_value(), !openai_ending) << finish_reason_name(ending);
    EXPECT_NE(events.find("there"), std::string::npos) << "the last text still streams: " << events;
  }
}

// Content-only deltas skip the JSON DOM (CompletionOutput::content_event); every such event must be byte for byte the
// DOM rendering of the chunk, for text that needs escaping and for invalid UTF-8 (replaced, as the DOM path does).
TEST_F(CompletionOutputTest, ContentEventsEqualTheJsonDomRendering) {
  const std::vector<std::string> pieces = {
      "plain", " \"quoted\" \\ back", "line\nbreak\ttab\x01", "caf\xC3\xA9 \xE4\xB8\xAD", "bad \xFF byte", "</script>"};
  for (ApiKind kind : {ApiKind::kChat, ApiKind::kCompletion}) {
    work_.kind = kind;
    work_.parse_tool_calls = false;
    CompletionOutput output(work_, "my-model", *tokenizer_, metrics_, now_timing());
    std::vector<std::string> sse;
    for (const StreamDelta& delta : deltas_of(pieces)) {
      std::vector<StreamDelta> one = {delta};
      sse.push_back(output.stream_events(one));
    }
    const bool chat = kind == ApiKind::kChat;
    const Json first = events(sse[0]).back();  // chat: after the role chunk
    for (size_t i = 0; i + 1 < pieces.size(); ++i) {
      Json item = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
      if (chat)
        item["delta"] = {{"content", pieces[i]}};
      else
        item["text"] = pieces[i];
      const Json expected = {
          {"id", first["id"]},           {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", first["created"]}, {"model", "my-model"},
          {"choices", {item}},           {"usage", nullptr}};
      const std::string expected_event =
          "data: " + expected.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
      const std::string& event = sse[i];
      EXPECT_EQ(event.substr(event.size() - expected_event.size()), expected_event) << "piece " << i;
    }
  }
}

}  // namespace
}  // namespace qinfer::server
