// `qinfer bench throughput` on the CPU backend with the tiny test model, through its CLI registration.
#include "cli/bench_throughput.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/test_model.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::cli {
namespace {

nlohmann::json run_cli(std::vector<std::string> args) {
  CLI::App app;
  CLI::App* bench = app.add_subcommand("bench");
  register_bench_throughput(*bench);
  args.insert(args.begin(), {"qinfer", "bench", "throughput", "--load-format", "dummy", "--preset", "tiny", "--device",
                             "cpu", "--threads", "2", "--max-model-len", "64", "--json"});
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  if (!spdlog::get("qinfer")) init_logging("warn");  // logs to stderr, as in main(); stdout is the JSON
  ::testing::internal::CaptureStdout();
  app.parse(static_cast<int>(argv.size()), argv.data());
  return nlohmann::json::parse(::testing::internal::GetCapturedStdout());
}

TEST(BenchThroughput, RandomPromptsYieldExactlyOutputLenTokens) {
  nlohmann::json report = run_cli({"--num-prompts", "5", "--input-len", "9", "--output-len", "3", "--max-num-seqs", "4",
                                   "--max-num-batched-tokens", "64"});
  for (const char* key : {"requests", "input_tokens", "output_tokens", "elapsed_s", "requests_per_s",
                          "output_tokens_per_s", "total_tokens_per_s", "mean_batch_size", "prefix_cache_hit_rate"})
    EXPECT_TRUE(report.contains(key)) << key;
  EXPECT_EQ(report["requests"], 5);
  EXPECT_EQ(report["input_tokens"], 45);
  EXPECT_EQ(report["output_tokens"], 15);
  EXPECT_GT(report["mean_batch_size"].get<double>(), 1.0);
  // The CPU backend's forward is most of each step; the engine's host share is positive but small.
  EXPECT_GT(report["host_overhead_per_step_s"].get<double>(), 0.0);
  EXPECT_GT(report["backend_fraction"].get<double>(), 0.0);
  EXPECT_LE(report["backend_fraction"].get<double>(), 1.0);
  EXPECT_NEAR(report["output_tokens_per_s"].get<double>(), 15 / report["elapsed_s"].get<double>(), 1e-6);
}

TEST(BenchThroughput, SharedPrefixHitsThePrefixCache) {
  nlohmann::json report =
      run_cli({"--num-prompts", "4", "--input-len", "40", "--shared-prefix-len", "36", "--output-len", "2",
               "--max-num-seqs", "1", "--max-num-batched-tokens", "64", "--block-size", "16"});
  // Requests run one at a time: the 3 later ones each map 2 cached blocks (32 of their 40 tokens).
  EXPECT_NEAR(report["prefix_cache_hit_rate"].get<double>(), 3.0 * 32 / (4 * 40), 1e-9);
  nlohmann::json uncached =
      run_cli({"--num-prompts", "4", "--input-len", "40", "--shared-prefix-len", "36", "--output-len", "2",
               "--max-num-seqs", "1", "--max-num-batched-tokens", "64", "--no-enable-prefix-caching"});
  EXPECT_EQ(uncached["prefix_cache_hit_rate"].get<double>(), 0.0);
}

TEST(BenchThroughput, DatasetLinesAreCheckedWithFileAndLine) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / "qinfer_bench_dataset_test.jsonl";
  {
    std::ofstream out(path);
    out << "{\"prompt_ids\": [1, 2, 3], \"output_len\": 4}\n\n{\"prompt_ids\": [5, 99999999]}\n";
  }
  try {
    read_dataset(path, 1000, 8);
    FAIL() << "accepted an id outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find(".jsonl:3:"), std::string::npos) << e.what();
  }
  {
    std::ofstream out(path);
    out << "{\"prompt_ids\": [1, 2, 3], \"output_len\": 4}\n{\"prompt_ids\": [5]}\n";
  }
  ThroughputWorkload workload = read_dataset(path, 1000, 8);
  EXPECT_EQ(workload.max_tokens, (std::vector<int32_t>{4, 8}));
  EXPECT_FALSE(workload.ignore_eos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qinfer::cli
