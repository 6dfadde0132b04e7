// `qinfer generate --device cuda --speculative-config '{"method": "ngram", ...}'` end to end on a generated tiny model,
// against the same command without speculation, greedy and seeded; and the draft_model method. Verify steps run the
// prefill path where plain decode runs the decode path (other GEMVs and attention kernels), so the logits move by bf16
// rounding and a near tie may flip (as EngineGpuInvariance states): tokens must be equal until a flip, greedy flips
// only where the plain run's top-2 margin is below the tie margin, logprobs equal within a tolerance up to there, and
// at least three quarters of all tokens compared. A broken verify step (a wrong position, draw or K/V row) shows as
// early O(1) differences.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "testing/run_qinfer.h"

namespace qinfer {
namespace {

using cli::ProcessResult;
using cli::run_qinfer;

constexpr float kTieMargin = 0.1f, kLogprobTolerance = 0.1f;
constexpr int kMaxTokens = 32;

struct GeneratedToken {
  int32_t token;
  float logprob;
  float margin;  // top-1 minus top-2 logprob
};

std::vector<GeneratedToken> parse_generated(const std::string& output) {
  const nlohmann::json out = nlohmann::json::parse(output.substr(output.find('{')));
  std::vector<GeneratedToken> tokens;
  for (const nlohmann::json& lp : out.at("logprobs")) {
    const nlohmann::json& top = lp.at("logprobs");
    const float margin = top.size() >= 2 ? top[0].get<float>() - top[1].get<float>() : 0.0f;
    tokens.push_back({lp.at("token").get<int32_t>(), lp.at("logprob").get<float>(), margin});
  }
  return tokens;
}

class SpeculativeGenerateGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = std::filesystem::temp_directory_path() / ("qinfer-gpu-spec-" + std::to_string(::getpid()));
    const ProcessResult made = run_qinfer("make-test-model --preset tiny --seed 3 --out " + model_.string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void TearDown() override {
    if (!model_.empty()) std::filesystem::remove_all(model_);
  }

  // The generated tokens of one request: `prompt` (periodic, so that n-gram proposals exist from the first step) and
  // `sampling` flags, with speculation when `speculative_config` is not empty.
  std::vector<GeneratedToken> generate(const std::string& prompt, const std::string& sampling,
                                       const std::string& speculative_config) const {
    std::string command = "generate --device cuda --max-model-len 512 --kv-cache-memory-bytes 67108864 --model " +
                          model_.string() + " --prompt-ids " + prompt + " --max-tokens " + std::to_string(kMaxTokens) +
                          " --ignore-eos --json --logprobs 2 " + sampling;
    if (!speculative_config.empty()) command += " --speculative-config '" + speculative_config + "'";
    const ProcessResult run = run_qinfer(command);
    EXPECT_EQ(run.exit_code, 0) << command << "\n" << run.output;
    if (run.exit_code != 0) return {};
    return parse_generated(run.output);
  }

  // The comparison of the file comment over several requests; `greedy` decides which flips are allowed.
  void expect_same(const std::vector<std::vector<GeneratedToken>>& plain,
                   const std::vector<std::vector<GeneratedToken>>& speculative, bool greedy) {
    ASSERT_EQ(plain.size(), speculative.size());
    size_t compared = 0, total = 0;
    for (size_t r = 0; r < plain.size(); ++r) {
      ASSERT_EQ(plain[r].size(), static_cast<size_t>(kMaxTokens)) << "request " << r;
      ASSERT_EQ(speculative[r].size(), plain[r].size()) << "request " << r;
      total += plain[r].size();
      for (size_t i = 0; i < plain[r].size(); ++i) {
        const GeneratedToken &a = plain[r][i], &b = speculative[r][i];
        if (a.token != b.token) {
          if (greedy) {
            EXPECT_LT(a.margin, kTieMargin) << "request " << r << " token " << i << ": a clear argmax flipped";
          }
          break;
        }
        EXPECT_LT(std::fabs(a.logprob - b.logprob), kLogprobTolerance) << "request " << r << " token " << i;
        ++compared;
      }
    }
    EXPECT_GE(4 * compared, 3 * total) << compared << " of " << total << " tokens compared";
  }

  std::filesystem::path model_;
};

TEST_F(SpeculativeGenerateGpu, NgramOutputEqualsPlainGreedyAndSeeded) {
  const std::vector<std::string> prompts = {"1,2,3,4,5,1,2,3,4,5,1,2,3,4,5,1,2,3", "70,80,90,70,80,90,70,80,90,70",
                                            "9,8,7,6,5,4,3,9,8,7,6,5,4,3,9,8,7"};
  const std::vector<std::string> seeds = {"11", "12", "13", "14"};
  const std::string greedy = "--temperature 0", k4 = R"({"method": "ngram", "num_speculative_tokens": 4})",
                    k8 = R"({"method": "ngram", "num_speculative_tokens": 8})";
  const auto seeded = [](const std::string& seed) { return "--temperature 0.8 --seed " + seed; };
  std::vector<std::vector<GeneratedToken>> plain_greedy, plain_seeded;
  for (const std::string& prompt : prompts) plain_greedy.push_back(generate(prompt, greedy, ""));
  for (const std::string& seed : seeds) plain_seeded.push_back(generate(prompts[0], seeded(seed), ""));
  for (const std::string& config : {k4, k8}) {
    std::vector<std::vector<GeneratedToken>> speculative;
    for (const std::string& prompt : prompts) speculative.push_back(generate(prompt, greedy, config));
    expect_same(plain_greedy, speculative, /*greedy=*/true);
  }
  std::vector<std::vector<GeneratedToken>> speculative;
  for (const std::string& seed : seeds) speculative.push_back(generate(prompts[0], seeded(seed), k4));
  expect_same(plain_seeded, speculative, /*greedy=*/false);
}

// The draft_model method through generate on the GPU: the model as its own draft gives the plain greedy tokens (up to
// near ties), and a seeded sampled request (rejection sampling) gives the same tokens twice.
TEST_F(SpeculativeGenerateGpu, DraftModelGreedyEqualsPlainAndSeededRepeats) {
  const std::vector<std::string> prompts = {"1,2,3,4,5,6,7,8,9", "70,80,90,100,110,120,130"};
  const std::string draft =
      R"({"method": "draft_model", "model": ")" + model_.string() + R"(", "num_speculative_tokens": 4})";
  std::vector<std::vector<GeneratedToken>> plain, speculative;
  for (const std::string& prompt : prompts) {
    plain.push_back(generate(prompt, "--temperature 0", ""));
    speculative.push_back(generate(prompt, "--temperature 0", draft));
  }
  expect_same(plain, speculative, /*greedy=*/true);
  const std::vector<GeneratedToken> first = generate(prompts[0], "--temperature 0.8 --seed 21", draft);
  const std::vector<GeneratedToken> second = generate(prompts[0], "--temperature 0.8 --seed 21", draft);
  ASSERT_EQ(first.size(), static_cast<size_t>(kMaxTokens));
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].token, second[i].token) << "token " << i;
}

}  // namespace
}  // namespace qinfer
