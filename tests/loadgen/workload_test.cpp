// Prompts: random words, exact-length random prompts with the real Qwen3 tokenizer, and JSONL datasets.
#include "loadgen/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loadgen/request_body.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qinfer::loadgen {
namespace {

const std::filesystem::path kTokenizerDir = std::filesystem::path(QINFER_SOURCE_DIR) / ".assets/qwen3-tokenizer";

TEST(Workload, RandomWordsAreDeterministicAndDifferent) {
  const std::vector<PromptSpec> a = random_prompts(3, 16, 1, nullptr);
  const std::vector<PromptSpec> b = random_prompts(3, 16, 1, nullptr);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].text, b[0].text);
  EXPECT_NE(a[0].text, a[1].text);
  EXPECT_EQ(std::count(a[0].text.begin(), a[0].text.end(), ' '), 15);
  EXPECT_FALSE(a[0].prompt_tokens);
}

TEST(Workload, TokenizerPromptsHaveExactlyInputLenTokens) {
  if (!std::filesystem::exists(kTokenizerDir / "tokenizer.json")) GTEST_SKIP() << "no " << kTokenizerDir;
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kTokenizerDir);
  for (int input_len : {1, 16, 128, 1000}) {
    const std::vector<PromptSpec> prompts = random_prompts(4, input_len, 42, &tokenizer);
    for (const PromptSpec& p : prompts) {
      EXPECT_EQ(static_cast<int>(tokenizer.encode(p.text, false).size()), input_len) << p.text;
      EXPECT_EQ(p.prompt_tokens, input_len);
    }
  }
}

class JsonlDataset : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("loadgen_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".jsonl");
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(JsonlDataset, PromptsAndOutputLengthsCycle) {
  const auto path = write("{\"prompt\": \"a\", \"output_len\": 5}\n\n{\"prompt\": \"b\"}\n");
  const std::vector<PromptSpec> prompts = load_jsonl_prompts(path, 3);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].text, "a");
  EXPECT_EQ(prompts[0].output_len, 5);
  EXPECT_EQ(prompts[1].text, "b");
  EXPECT_FALSE(prompts[1].output_len);
  EXPECT_EQ(prompts[2].text, "a");
}

TEST_F(JsonlDataset, BadLinesNameFileLineAndField) {
  const auto expect_format_error = [](const std::filesystem::path& p, const std::string& needle) {
    try {
      load_jsonl_prompts(p, 1);
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_format_error(write("{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n"), ":2: field 'prompt'");
  expect_format_error(write("{\"prompt\": \"a\", \"output_len\": 0}\n"), ":1: field 'output_len'");
  expect_format_error(write("not json\n"), ":1: expected one JSON object");
  expect_format_error(write("\n"), "no prompts");
  EXPECT_THROW(load_jsonl_prompts("/nonexistent/x.jsonl", 1), Error);
}

TEST(RequestBody, CompletionAndChatShapes) {
  PromptSpec prompt;
  prompt.text = "hello";
  prompt.output_len = 3;
  const auto completion = nlohmann::json::parse(request_body({.model = "m", .chat = false, .output_len = 8}, prompt));
  EXPECT_EQ(completion["prompt"], "hello");
  EXPECT_EQ(completion["max_tokens"], 3);
  EXPECT_EQ(completion["ignore_eos"], true);
  EXPECT_EQ(completion["stream"], true);
  EXPECT_EQ(completion["stream_options"]["include_usage"], true);
  prompt.output_len.reset();
  const auto chat = nlohmann::json::parse(request_body({.model = "m", .chat = true, .output_len = 8}, prompt));
  EXPECT_EQ(chat["messages"][0]["content"], "hello");
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["max_tokens"], 8);
  EXPECT_FALSE(chat.contains("prompt"));
}

TEST(RequestBody, ExtraBodyIsMergedLast) {
  PromptSpec prompt;
  prompt.text = "hello";
  const nlohmann::json extra = {{"response_format", {{"type", "json_object"}}}, {"temperature", 0.7}};
  const auto body =
      nlohmann::json::parse(request_body({.model = "m", .chat = true, .output_len = 8, .extra_body = extra}, prompt));
  EXPECT_EQ(body["response_format"]["type"], "json_object");
  EXPECT_EQ(body["temperature"], 0.7);  // the extra fields win over the defaults
  EXPECT_EQ(body["max_tokens"], 8);
}

}  // namespace
}  // namespace qinfer::loadgen
