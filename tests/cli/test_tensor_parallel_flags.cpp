// --tensor-parallel-size through the real binary: CPU ranks give the tokens of one rank, bad sizes exit 2 naming the
// numbers, and so does the CUDA-only --tensor-parallel-same-device on the CPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "testing/run_qinfer.h"

namespace qinfer::cli {
namespace {

const std::string kGenerate =
    "generate --device cpu --load-format dummy --preset tiny-untied --max-model-len 256 --threads 2 "
    "--prompt-ids 11,2024,7,150000,42,9 --max-tokens 12 --ignore-eos --temperature 0 --json";

nlohmann::json generated(const std::string& extra) {
  const ProcessResult run = run_qinfer(kGenerate + " " + extra);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const size_t start = run.output.find("{\"");
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(run.output.substr(start, run.output.find('\n', start) - start));
}

TEST(TensorParallelFlags, TwoCpuRanksGenerateTheTokensOfOne) {
  const nlohmann::json one = generated("--tensor-parallel-size 1");
  const nlohmann::json two = generated("--tensor-parallel-size 2");
  const nlohmann::json shard = generated("--num-shard 2");
  ASSERT_EQ(one["token_ids"].size(), 12u);
  EXPECT_EQ(two["token_ids"], one["token_ids"]);
  EXPECT_EQ(shard["token_ids"], one["token_ids"]);
}

TEST(TensorParallelFlags, SizesThatCannotSplitTheModelExitTwoNamingTheNumbers) {
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {kGenerate + " --tensor-parallel-size 3",
            "--tensor-parallel-size 3 does not divide the model's num_key_value_heads 2"},
           {kGenerate + " -tp 4", "--tensor-parallel-size 4 does not divide the model's num_key_value_heads 2"},
           {kGenerate + " -tp 0", "--tensor-parallel-size 0: must be at least 1"},
           {kGenerate + " -tp 2 --tensor-parallel-same-device", "--tensor-parallel-same-device needs --device cuda"},
           {"serve --device cpu --port 0 -tp 2",
            "--tensor-parallel-size 2 does not divide the model's "
            "num_key_value_heads 1"},
       }) {
    const ProcessResult run = run_qinfer(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(expected), std::string::npos) << args << "\n" << run.output;
  }
}

}  // namespace
}  // namespace qinfer::cli
