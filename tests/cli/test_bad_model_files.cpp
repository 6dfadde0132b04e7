// A model whose config.json or generation_config.json holds a value out of range is malformed: `generate` and `serve`
// exit 4 before anything runs, naming the file, the field, the range and the value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/run_qinfer.h"

namespace qinfer::cli {
namespace {

class BadModelFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = std::filesystem::temp_directory_path() / ("qinfer-cli-bad-model-" + std::to_string(::getpid()));
    ProcessResult r = run_qinfer("make-test-model --preset tiny --seed 5 --tokenizer-dir " +
                                 std::string(QINFER_TEST_TOKENIZER_DIR) + " --out " + (root_ / "good").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }

  // A copy of the good model with `file`'s `field` set to `value`.
  static std::filesystem::path edited(const std::string& file, const std::string& field, const nlohmann::json& value) {
    const auto dir = root_ / "edited";
    std::filesystem::remove_all(dir);
    std::filesystem::copy(root_ / "good", dir);
    nlohmann::json json = nlohmann::json::parse(std::ifstream(dir / file));
    json[field] = value;
    std::ofstream(dir / file) << json.dump();
    return dir;
  }
  static std::filesystem::path root_;
};

std::filesystem::path BadModelFiles::root_;

TEST_F(BadModelFiles, OutOfRangeValuesExit4NamingFileAndField) {
  struct Case {
    const char* file;
    const char* field;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {
      {"config.json", "rms_norm_eps", 0.0, "config.json: field 'rms_norm_eps' must be positive and finite, got 0"},
      {"config.json", "max_position_embeddings", int64_t{1} << 31,
       "config.json: field 'max_position_embeddings' must be in [1, 2147483647], got 2147483648"},
      {"config.json", "num_hidden_layers", (int64_t{1} << 32) + 4,  // 4 after a cut to 32 bits
       "config.json: field 'num_hidden_layers' expected an integer in [-2147483648, 2147483647], got 4294967300"},
      {"generation_config.json", "top_p", 2.0, "generation_config.json: field 'top_p' must be in (0, 1], got 2"},
      {"generation_config.json", "top_k", -7, "generation_config.json: field 'top_k' must be -1, 0 or in [1, "},
  };
  for (const Case& c : cases) {
    const auto dir = edited(c.file, c.field, c.value);
    ProcessResult r =
        run_qinfer("generate --device cpu --model " + dir.string() + " --prompt-ids 1,2,3 --max-tokens 2");
    EXPECT_EQ(r.exit_code, 4) << c.field << ": " << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.field << ": " << r.output;
  }
  // serve refuses the model the same way while loading.
  const auto dir = edited("config.json", "rope_theta", -1);
  ProcessResult r = run_qinfer("serve --port 0 --threads 1 --model " + dir.string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("config.json: field 'rope_theta' must be positive and finite, got -1"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace qinfer::cli
