// `qinfer generate --json` and `qinfer tokenize --chat` through the real binary, with the real Qwen3 tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/run_qinfer.h"

namespace qinfer::cli {
namespace {

const std::filesystem::path kTokenizerDir = QINFER_TEST_TOKENIZER_DIR;

class TextCommands : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = std::filesystem::temp_directory_path() / ("qinfer-cli-text-" + std::to_string(::getpid()));
    ProcessResult r = run_qinfer("make-test-model --preset tiny --seed 1 --out " + (root_ / "model").string() +
                                 " --tokenizer-dir " + kTokenizerDir.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }
  static std::filesystem::path root_;
};

std::filesystem::path TextCommands::root_;

TEST_F(TextCommands, GenerateJsonPrintsTheGeneratedText) {
  const std::string model = (root_ / "model").string();
  ProcessResult plain =
      run_qinfer("generate --device cpu --model " + model + " --prompt Hello --max-tokens 8 --ignore-eos");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ProcessResult json =
      run_qinfer("generate --device cpu --model " + model + " --prompt Hello --max-tokens 8 --ignore-eos --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const size_t start = json.output.find("{\"");
  ASSERT_NE(start, std::string::npos) << json.output;
  const nlohmann::json out = nlohmann::json::parse(json.output.substr(start, json.output.find('\n', start) - start));
  ASSERT_EQ(out["token_ids"].size(), 8u);
  const std::string text = out["text"].get<std::string>();
  EXPECT_FALSE(text.empty());
  // The plain mode prints the same greedy text (beside the finish reason on standard error).
  EXPECT_NE(plain.output.find(text + "\n"), std::string::npos) << plain.output << " vs " << text;
}

TEST_F(TextCommands, TokenizeChatKeepsTheToolKeyOrder) {
  // Properties listed zeta before alpha: transformers renders the client's dict order, so must we.
  const std::filesystem::path chat = root_ / "chat.json";
  std::ofstream(chat) << R"({"messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "pick", "parameters": {"type": "object",
      "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}]})";
  ProcessResult r = run_qinfer("tokenize --model " + (root_ / "model").string() + " --chat " + chat.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = nlohmann::json::parse(r.output)["text"].get<std::string>();
  const size_t zeta = text.find("\"zeta\"");
  const size_t alpha = text.find("\"alpha\"");
  ASSERT_NE(zeta, std::string::npos) << text;
  ASSERT_NE(alpha, std::string::npos) << text;
  EXPECT_LT(zeta, alpha) << text;
  EXPECT_NE(text.find(R"({"type": "function", "function": {"name": "pick")"), std::string::npos) << text;
}

}  // namespace
}  // namespace qinfer::cli
