// `--quantization` and quantized checkpoints through the real binary: exit codes 2 (the flag contradicts the
// checkpoint), 4 (malformed tensors) and 5 (a format qinfer does not run or cannot make at load), and the formats
// it loads generating text on the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/run_qinfer.h"

namespace qinfer::cli {
namespace {

class QuantizationFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = std::filesystem::temp_directory_path() / ("qinfer-cli-quant-" + std::to_string(::getpid()));
    for (const char* format : {"awq", "fp8"}) {
      ProcessResult r = run_qinfer(std::string("make-test-model --preset tiny --seed 3 --quantization ") + format +
                                   " --out " + (root_ / format).string());
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    ProcessResult r = run_qinfer("make-test-model --preset tiny --seed 3 --out " + (root_ / "bf16").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }

  static std::string generate(const std::string& model, const std::string& extra = "") {
    return "generate --device cpu --model " + (root_ / model).string() + " --prompt-ids 1,2,3 --max-tokens 3 " + extra;
  }
  static std::filesystem::path root_;
};

std::filesystem::path QuantizationFlags::root_;

TEST_F(QuantizationFlags, QuantizedCheckpointsGenerateOnTheCpu) {
  for (const char* format : {"awq", "fp8"}) {
    ProcessResult r = run_qinfer(generate(format));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run_qinfer(generate(format, std::string("--quantization ") + format));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  ProcessResult r = run_qinfer(generate("bf16", "--quantization fp8"));  // online FP8
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_qinfer(
      "generate --device cpu --load-format dummy --preset tiny --quantization awq --prompt-ids 1,2 "
      "--max-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(QuantizationFlags, AFlagThatContradictsTheCheckpointIsAnInvalidArgument) {
  ProcessResult r = run_qinfer(generate("awq", "--quantization fp8"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("quant_method 'awq'"), std::string::npos) << r.output;
  r = run_qinfer(generate("bf16", "--quantization gptq"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("does not quantize to gptq at load"), std::string::npos) << r.output;
  r = run_qinfer(generate("bf16", "--quantization int8"));  // a usage error: CLI11's exit code, naming the flag
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--quantization"), std::string::npos) << r.output;
}

TEST_F(QuantizationFlags, MalformedAndUnsupportedCheckpointsExitWithTheirCodes) {
  const auto dir = root_ / "edited";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(root_ / "awq", dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  config["quantization_config"]["group_size"] = 64;  // the tensors were written with groups of 128
  std::ofstream(dir / "config.json") << config.dump();
  ProcessResult r = run_qinfer(generate("edited"));
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("model.layers.0.self_attn.q_proj.qzeros"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("expected [4, 64]"), std::string::npos) << r.output;

  config["quantization_config"]["group_size"] = 128;
  config["quantization_config"]["version"] = "exllama";
  std::ofstream(dir / "config.json") << config.dump();
  r = run_qinfer(generate("edited"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("quantization_config.version"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace qinfer::cli
