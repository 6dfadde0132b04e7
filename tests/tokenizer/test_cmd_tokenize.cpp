// `qinfer tokenize` through its CLI11 registration (the command's source is compiled into this test), on the real
// Qwen3 tokenizer: --text, --jsonl encode/decode and --chat must agree with the HF reference and the library.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/commands.h"
#include "testing/tokenizer_assets.h"
#include "util/error.h"

namespace qinfer {
namespace {

// Runs `tokenize ARGS` with stdin_text as standard input; returns standard output.
std::string run_tokenize(std::vector<std::string> args, const std::string& stdin_text = "") {
  CLI::App app;
  cli::register_tokenize(app);
  args.insert(args.begin(), "tokenize");
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  std::istringstream in(stdin_text);
  std::ostringstream out;
  auto* old_in = std::cin.rdbuf(in.rdbuf());
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  try {
    app.parse(args);
  } catch (...) {
    std::cin.rdbuf(old_in);
    std::cout.rdbuf(old_out);
    throw;
  }
  std::cin.rdbuf(old_in);
  std::cout.rdbuf(old_out);
  return out.str();
}

class CmdTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(test::kQwen3TokenizerJson)) << "run tools/fetch-test-assets.sh";
    model_dir_ = test::kQwen3TokenizerJson.parent_path().string();
  }
  std::string model_dir_;
};

TEST_F(CmdTokenize, TextPrintsIdsOfTheHfReference) {
  const auto docs = test::read_jsonl(test::kTokenizerData / "corpus/edge.jsonl");
  const auto expected = test::read_jsonl(test::kTokenizerData / "expected/edge_ids.jsonl");
  for (size_t i : {11u, 24u, 26u}) {  // Hello, world! / chat turns / <think> block
    const std::string out = run_tokenize({"--model", model_dir_, "--text", docs[i].get<std::string>()});
    EXPECT_EQ(nlohmann::json::parse(out), expected[i]["ids"]) << docs[i].dump();
  }
}

TEST_F(CmdTokenize, JsonlEncodesAndDecodesLineByLine) {
  const std::string out = run_tokenize({"--model", model_dir_, "--jsonl"}, "\"Hello, world!\"\n\"<|im_end|>\"\n");
  EXPECT_EQ(out, "[9707,11,1879,0]\n[151645]\n");
  const std::string no_special =
      run_tokenize({"--model", model_dir_, "--jsonl", "--no-special-tokens"}, "\"<|im_end|>\"\n");
  EXPECT_NE(no_special, "[151645]\n");
  const std::string decoded = run_tokenize({"--model", model_dir_, "--jsonl", "--decode"}, "[9707,11,1879,0,151645]\n");
  EXPECT_EQ(decoded, "\"Hello, world!<|im_end|>\"\n");
  const std::string skipped =
      run_tokenize({"--model", model_dir_, "--jsonl", "--decode", "--skip-special-tokens"}, "[9707,151645]\n");
  EXPECT_EQ(skipped, "\"Hello\"\n");
}

TEST_F(CmdTokenize, BadInputIsATypedErrorNamingTheLine) {
  try {
    run_tokenize({"--model", model_dir_, "--jsonl"}, "\"ok\"\n\"\\ud800\"\n");
    ADD_FAILURE() << "a lone surrogate was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_tokenize({"--model", model_dir_, "--jsonl", "--decode"}, "[1, \"x\"]\n"), Error);
  EXPECT_THROW(run_tokenize({"--model", model_dir_}), Error);  // no mode
}

TEST_F(CmdTokenize, ChatRendersTheTemplateAndEncodesIt) {
  const auto chat_file = std::filesystem::temp_directory_path() / "qinfer_cmd_tokenize_chat.json";
  std::ofstream(chat_file) << R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true,
                                  "chat_template_kwargs": {"enable_thinking": false}})";
  const auto result = nlohmann::json::parse(run_tokenize({"--model", model_dir_, "--chat", chat_file.string()}));
  const std::string text = result["text"].get<std::string>();
  EXPECT_EQ(text.rfind("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0), 0u) << text;
  const Tokenizer tokenizer = Tokenizer::from_file(test::kQwen3TokenizerJson);
  EXPECT_EQ(result["ids"].get<std::vector<int32_t>>(), tokenizer.encode(text));
}

}  // namespace
}  // namespace qinfer
