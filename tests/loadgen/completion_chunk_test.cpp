// Reading OpenAI stream events: completions, chat deltas, usage, the end marker and errors.
#include "loadgen/completion_chunk.h"

#include <gtest/gtest.h>

namespace qinfer::loadgen {
namespace {

TEST(CompletionChunk, CompletionText) {
  const CompletionChunk c = parse_completion_chunk(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})");
  EXPECT_TRUE(c.has_text);
  EXPECT_FALSE(c.done || c.error || c.completion_tokens);
}

TEST(CompletionChunk, ChatDeltas) {
  EXPECT_TRUE(parse_completion_chunk(R"({"choices":[{"delta":{"content":"x"}}]})").has_text);
  EXPECT_TRUE(parse_completion_chunk(R"({"choices":[{"delta":{"reasoning_content":"x"}}]})").has_text);
  EXPECT_FALSE(parse_completion_chunk(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").has_text);
  EXPECT_FALSE(parse_completion_chunk(R"({"choices":[{"delta":{},"finish_reason":"length"}]})").has_text);
}

TEST(CompletionChunk, UsageChunk) {
  const CompletionChunk c =
      parse_completion_chunk(R"({"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}})");
  EXPECT_FALSE(c.has_text);
  EXPECT_EQ(c.prompt_tokens, 16);
  EXPECT_EQ(c.completion_tokens, 8);
  EXPECT_FALSE(parse_completion_chunk(R"({"choices":[{"text":"a"}],"usage":null})").completion_tokens);
}

TEST(CompletionChunk, DoneAndErrors) {
  EXPECT_TRUE(parse_completion_chunk("[DONE]").done);
  const CompletionChunk error = parse_completion_chunk(R"({"error":{"message":"boom","type":"server_error"}})");
  ASSERT_TRUE(error.error);
  EXPECT_NE(error.error->find("boom"), std::string::npos);
  EXPECT_TRUE(parse_completion_chunk("not json").error);
  EXPECT_TRUE(parse_completion_chunk("[1,2]").error);
}

}  // namespace
}  // namespace qinfer::loadgen
