#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace qinfer::server {
namespace {

const std::string kText =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"noop\"}\n</tool_call>";

TEST(ToolCallParser, WholeText) {
  ToolCallParser parser;
  ToolCallParser::Output out = parser.push(kText);
  ToolCallParser::Output end = parser.finish();
  EXPECT_EQ(out.content + end.content, "Let me check.\n\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments), nlohmann::json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(out.calls[1].name, "noop");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_TRUE(parser.saw_calls());
}

// Any split of the text into deltas gives the same content and calls, and no tag text is ever released as content.
TEST(ToolCallParser, EverySplitPointGivesTheSameResult) {
  for (size_t split = 0; split <= kText.size(); ++split) {
    for (size_t step : {size_t{1}, size_t{3}, size_t{7}}) {
      ToolCallParser parser;
      std::string content;
      std::vector<ParsedToolCall> calls;
      auto feed = [&](std::string_view piece) {
        ToolCallParser::Output out = parser.push(piece);
        EXPECT_EQ(out.content.find('<'), std::string::npos) << "tag text leaked at split " << split;
        content += out.content;
        calls.insert(calls.end(), out.calls.begin(), out.calls.end());
      };
      feed(std::string_view(kText).substr(0, split));
      for (size_t i = split; i < kText.size(); i += step) feed(std::string_view(kText).substr(i, step));
      content += parser.finish().content;
      EXPECT_EQ(content, "Let me check.\n\n");
      ASSERT_EQ(calls.size(), 2u);
      EXPECT_EQ(calls[0].name, "get_weather");
    }
  }
}

// A closing tag quoted inside an argument's JSON string (escaped quotes and backslashes around it too) is the string's
// content; the call ends at the tag after the JSON text, whatever the split of the text into deltas.
TEST(ToolCallParser, ClosingTagInsideAJsonStringIsContentOfTheArguments) {
  const std::string text =
      "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": "
      "\"end with </tool_call> or \\\"</tool_call>\\\" \\\\\", \"n\": 1}}\n</tool_call>after";
  for (size_t step : {size_t{1}, size_t{2}, size_t{5}, text.size()}) {
    ToolCallParser parser;
    std::string content;
    std::vector<ParsedToolCall> calls;
    for (size_t i = 0; i < text.size(); i += step) {
      ToolCallParser::Output out = parser.push(std::string_view(text).substr(i, step));
      content += out.content;
      calls.insert(calls.end(), out.calls.begin(), out.calls.end());
    }
    content += parser.finish().content;
    EXPECT_EQ(content, "after") << "step " << step;
    ASSERT_EQ(calls.size(), 1u) << "step " << step;
    EXPECT_EQ(calls[0].name, "echo");
    EXPECT_EQ(nlohmann::json::parse(calls[0].arguments),
              (nlohmann::json{{"text", "end with </tool_call> or \"</tool_call>\" \\"}, {"n", 1}}));
  }
}

TEST(ToolCallParser, InvalidCallStaysVisibleAsContent) {
  ToolCallParser parser;
  ToolCallParser::Output out = parser.push("a<tool_call>{not json}</tool_call>b");
  out.content += parser.finish().content;
  EXPECT_EQ(out.content, "a<tool_call>{not json}</tool_call>b");
  EXPECT_TRUE(out.calls.empty());
  ToolCallParser strings;
  out = strings.push(R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"({"x": 1})");
  ToolCallParser bad_arguments;
  out = bad_arguments.push(R"(<tool_call>{"name": "f", "arguments": "{oops"}</tool_call>)");
  EXPECT_TRUE(out.calls.empty());
}

TEST(ToolCallParser, UnterminatedCallAndPartialTagAreFlushedAtTheEnd) {
  ToolCallParser parser;
  EXPECT_EQ(parser.push("x <tool_c").content, "x ");
  EXPECT_EQ(parser.finish().content, "<tool_c");
  ToolCallParser open;
  EXPECT_EQ(open.push("y<tool_call>{\"name\"").content, "y");
  EXPECT_EQ(open.finish().content, "<tool_call>{\"name\"");
}

TEST(ToolCallParser, OpenCallWithACompleteBodyCountsAtTheEnd) {
  ToolCallParser parser;
  EXPECT_EQ(parser.push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n").content, "");
  ToolCallParser::Output end = parser.finish();
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].name, "f");
  EXPECT_EQ(nlohmann::json::parse(end.calls[0].arguments), nlohmann::json::parse(R"({"x": [1, 2]})"));
}

}  // namespace
}  // namespace qinfer::server
