#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qinfer::server {
namespace {

// Feeds `text` cut at every position into two pieces and one byte at a time; all must give the same split.
void expect_split(bool opened, const std::string& text, const std::string& reasoning, const std::string& content) {
  std::vector<std::vector<std::string>> feeds = {{text}};
  for (size_t cut = 1; cut < text.size(); ++cut) feeds.push_back({text.substr(0, cut), text.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  feeds.push_back(bytes);
  for (const auto& feed : feeds) {
    ReasoningParser parser(opened);
    std::string got_reasoning, got_content;
    for (const std::string& piece : feed) {
      const auto out = parser.push(piece);
      got_reasoning += out.reasoning;
      got_content += out.content;
    }
    const auto out = parser.flush();
    got_reasoning += out.reasoning;
    got_content += out.content;
    EXPECT_EQ(got_reasoning, reasoning) << text;
    EXPECT_EQ(got_content, content) << text;
  }
}

TEST(ReasoningParser, SplitsThinkBlocksWhereverTagsAreCut) {
  expect_split(false, "<think>\nplan it\n</think>\n\nThe answer.", "\nplan it\n", "The answer.");
  expect_split(false, "No reasoning here.", "", "No reasoning here.");
  expect_split(false, "a <think> later is content", "", "a <think> later is content");
  expect_split(false, "<think>unfinished", "unfinished", "");
  expect_split(false, "<thin", "", "<thin");
}

TEST(ReasoningParser, PromptThatOpenedTheReasoning) {
  expect_split(true, "thinking...</think>\n\n{\"a\": 1}", "thinking...", "{\"a\": 1}");
  expect_split(true, "a < b </thin but still thinking", "a < b </thin but still thinking", "");
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace qinfer::server
