// The sampling flags shared by `qinfer generate` and `qinfer bench latency`: defaults, overrides and range errors
// in-process, then both commands as the real binary on the tiny preset (CPU).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/sampling_flags.h"
#include "testing/run_qinfer.h"
#include "util/error.h"

namespace qinfer::cli {
namespace {

constexpr int kVocab = 151936;

SamplingParams parse(std::vector<std::string> args, const SamplingParams& defaults) {
  CLI::App app;
  SamplingFlags flags;
  add_sampling_flags(app, flags, "test defaults");
  args.insert(args.begin(), "test");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return sampling_params_from_flags(flags, defaults, kVocab);
}

TEST(SamplingFlags, UnsetValuesComeFromTheDefaults) {
  const SamplingParams defaults{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.05f};
  const SamplingParams p = parse({}, defaults);
  EXPECT_EQ(p.temperature, 0.7f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.top_p, 0.8f);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_FALSE(p.has_penalties());
  EXPECT_EQ(p.num_top_logprobs, 0);
}

TEST(SamplingFlags, GivenValuesOverrideTheDefaults) {
  const SamplingParams p =
      parse({"--temperature", "0", "--top-k", "-1", "--top-p", "0.5", "--min-p", "0.1", "--presence-penalty", "1.5",
             "--repetition-penalty", "1.05", "--frequency-penalty", "-0.5", "--seed", "42", "--logprobs", "5"},
            SamplingParams{.temperature = 0.7f, .top_k = 20});
  EXPECT_TRUE(p.greedy());
  EXPECT_EQ(p.top_k, -1);
  EXPECT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.presence_penalty, 1.5f);
  EXPECT_EQ(p.repetition_penalty, 1.05f);
  EXPECT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.num_top_logprobs, 5);
}

TEST(SamplingFlags, OutOfRangeValuesNameTheField) {
  for (const auto& [flag, value, field] :
       std::vector<std::array<std::string, 3>>{{"--top-p", "1.5", "top_p"},
                                               {"--presence-penalty", "3", "presence_penalty"},
                                               {"--logprobs", "21", "top_logprobs"},
                                               {"--temperature", "-1", "temperature"}}) {
    try {
      parse({flag, value}, SamplingParams{});
      ADD_FAILURE() << flag << " " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

TEST(BenchLatencyCommand, SamplesWithTheGivenSettingsAndReportsThem) {
  const ProcessResult run = run_qinfer(
      "bench latency --load-format dummy --preset tiny --device cpu --batch 2 --input-len 12 --output-len 5 "
      "--temperature 0.7 --top-k 20 --top-p 0.8 --presence-penalty 1.5 --logprobs 3 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  EXPECT_EQ(json["decode_steps"], 4);
  EXPECT_FLOAT_EQ(json["sampling"]["temperature"].get<float>(), 0.7f);
  EXPECT_EQ(json["sampling"]["top_k"], 20);
  EXPECT_FLOAT_EQ(json["sampling"]["presence_penalty"].get<float>(), 1.5f);
  EXPECT_EQ(json["sampling"]["top_logprobs"], 3);
}

TEST(BenchLatencyCommand, DefaultsToGreedy) {
  const ProcessResult run =
      run_qinfer("bench latency --load-format dummy --preset tiny --device cpu --input-len 8 --output-len 2 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  EXPECT_EQ(json["sampling"]["temperature"], 0);
  EXPECT_EQ(json["sampling"]["top_k"], 0);
}

TEST(GenerateCommand, RejectsAnOutOfRangeSamplingValue) {
  const ProcessResult run =
      run_qinfer("generate --load-format dummy --preset tiny --device cpu --prompt-ids 1,2,3 --top-p 0");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("top_p must be in (0, 1]"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace qinfer::cli
