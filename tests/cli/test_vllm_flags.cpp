// vLLM users' command lines: flag spelling, errors (exit 2, "did you mean"), refused values (exit 5), global flags
// after the command, `serve --help` groups and docs/CLI.md listing every serve flag; the start-up summary lines.
// Launch lines with every accepted flag run against a real server in tests/server/node/vllm_compat.test.mjs.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "cli/parse_errors.h"
#include "cli/startup_summary.h"
#include "cli/vllm_serve_flags.h"
#include "model/test_model.h"
#include "testing/run_qinfer.h"
#include "util/error.h"

namespace qinfer::cli {
namespace {

TEST(FlagSpelling, UnderscoresInLongFlagNamesBecomeDashes) {
  const char* argv[] = {
      "qinfer", "serve", "--tokenizer_mode", "auto", "--max_model_len=4096", "--served-model-name", "my_model", "-tp",
      "1",      "--",    "--not_a_flag"};
  const std::vector<std::string> args = normalize_flag_spelling(11, argv);
  EXPECT_EQ(args, (std::vector<std::string>{"qinfer", "serve", "--tokenizer-mode", "auto", "--max-model-len=4096",
                                            "--served-model-name", "my_model", "--tensor-parallel-size", "1", "--",
                                            "--not_a_flag"}));
}

// What CLI11 hands over for `--allowed-origins '["*", "https://b.example"]'` (entries with their quotes), a whole JSON
// list, and plain origins: one per flag or comma-separated.
TEST(AllowedOrigins, JsonListsAndCommaListsBecomeOrigins) {
  const auto origins = [](std::vector<std::string> values) {
    VllmServeFlags flags;
    ModelFlags model;
    server::ServerOptions options;
    options.cors_origins = std::move(values);
    apply_vllm_serve_flags(flags, model, options);
    return options.cors_origins;
  };
  using Origins = std::vector<std::string>;
  EXPECT_EQ(origins({"\"*\"", "\"https://b.example\""}), (Origins{"*", "https://b.example"}));
  EXPECT_EQ(origins({"[\"*\"]"}), (Origins{"*"}));
  EXPECT_EQ(origins({"https://a.example, https://b.example", "http://c.example"}),
            (Origins{"https://a.example", "https://b.example", "http://c.example"}));
  EXPECT_THROW(origins({"[1]"}), Error);
}

TEST(FlagSpelling, ClosestNameIsATypoAwayOrNothing) {
  EXPECT_EQ(edit_distance("--max-num-seq", "--max-num-seqs"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  const std::vector<std::string> known = {"--max-num-seqs", "--max-model-len", "--enable-prefix-caching", "--port"};
  EXPECT_EQ(closest_name("--max-num-seq", known), "--max-num-seqs");
  EXPECT_EQ(closest_name("--enable-prefix-cache", known), "--enable-prefix-caching");
  EXPECT_EQ(closest_name("--prot", known), "--port");
  EXPECT_EQ(closest_name("--swap-space", known), std::nullopt);
}

TEST(FlagErrors, ExitTwoWithQinferErrorAndASuggestion) {
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"serve --max-num-seq 4",
            "qinfer: error: qinfer serve: unknown flag '--max-num-seq' (did you mean "
            "'--max-num-seqs'?)"},
           {"serv", "qinfer: error: unknown argument 'serv' (did you mean 'serve'?)"},
           {"serve --port abc", "qinfer: error: Could not convert: --port = abc"},
           {"serve --dtype hlaf", "qinfer: error: --dtype: hlaf not in"},
           {"serve --kv-cache-memory-bytes 8XB", "is not a size in bytes"},
           {"serve --scheduling-policy random", "qinfer: error: --scheduling-policy: random not in"},
           {"serve --enable-auto-tool-choice", "--enable-auto-tool-choice needs --tool-call-parser"},
           {"generate --promt x", "did you mean '--prompt'?"},
       }) {
    const ProcessResult run = run_qinfer(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.expected), std::string::npos) << c.args << "\n" << run.output;
  }
}

TEST(FlagErrors, UnsupportedValuesExitFiveNamingTheAlternative) {
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"serve --tool-call-parser qwen3_coder", "(--tool-call-parser hermes)"},
           {"serve --tokenizer-mode mistral", "(--tokenizer-mode auto)"},
       }) {
    const ProcessResult run = run_qinfer(args);
    EXPECT_EQ(run.exit_code, 5) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(expected), std::string::npos) << args << "\n" << run.output;
  }
}

TEST(FlagErrors, GlobalFlagsWorkAfterTheCommand) {
  const ProcessResult run = run_qinfer("serve --log-level bogus", false);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("unknown log level 'bogus'"), std::string::npos) << run.output;
}

// Long flag names in `serve --help`.
std::set<std::string> serve_help_flags(const std::string& help) {
  std::set<std::string> flags;
  const std::regex flag(R"((^|[ ,])(--[a-z0-9][a-z0-9-]*))");
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  --", 0) != 0 && line.rfind("  -h", 0) != 0) continue;  // option lines, not descriptions
    const std::string names = line.substr(0, line.find("  ", 2));
    for (auto it = std::sregex_iterator(names.begin(), names.end(), flag); it != std::sregex_iterator(); ++it)
      flags.insert((*it)[2]);
  }
  return flags;
}

TEST(ServeHelp, GroupsEveryFlagAndDocsListThemAll) {
  const ProcessResult run = run_qinfer("serve --help");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* group : {"\nModel:\n", "\nEngine:\n", "\nKV cache:\n", "\nAPI and requests:\n", "\nHTTP server:\n",
                            "\nLogs and metrics:\n"})
    EXPECT_NE(run.output.find(group), std::string::npos) << group << run.output;
  EXPECT_EQ(run.output.find("\nOther:\n"), std::string::npos) << "a serve flag without a group:\n" << run.output;
  std::ifstream file(std::string(QINFER_SOURCE_DIR) + "/docs/CLI.md");
  std::stringstream docs;
  docs << file.rdbuf();
  const std::set<std::string> flags = serve_help_flags(run.output);
  EXPECT_GT(flags.size(), 50u);
  for (const std::string& flag : flags) {
    if (flag == "--help") continue;
    EXPECT_NE(docs.str().find("`" + flag + "`"), std::string::npos) << flag << " is not in docs/CLI.md";
  }
}

TEST(StartupSummary, EngineAndMemoryPlanOfTheCpuBackend) {
  ThreadPool pool(1);
  ModelConfig config = test_model_preset("tiny");
  config.max_position_embeddings = 1024;
  auto model = std::make_shared<LoadedModel>(make_dummy_model(config, 1, &pool));
  BackendOptions options;
  options.num_threads = 1;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 64;
  options.kv_cache_bytes = int64_t{4} << 20;
  CpuBackend backend(model, options);
  const MemoryPlan plan = backend.memory_plan();
  EXPECT_EQ(plan.weights, config.num_parameters() * 2);  // bf16
  ASSERT_TRUE(plan.activations.has_value());
  EXPECT_GT(*plan.activations, 64 * config.hidden_size * 4);
  EXPECT_FALSE(plan.graphs.has_value());
  EXPECT_EQ(plan.kv.num_blocks, 64);  // 4 MiB of fp32 K/V: 4 layers x 2 x 1 KV head x 128 x 16 tokens x 4 B per block
  const std::string memory = memory_summary(plan, 1024);
  EXPECT_NE(memory.find("graphs n/a, KV cache 4.00 MiB = 64 blocks x 16 = 1024 tokens (1.0 sequences of 1024)"),
            std::string::npos)
      << memory;
  EngineOptions engine;
  engine.max_num_seqs = 4;
  engine.max_num_batched_tokens = 64;
  engine.policy = SchedulingPolicy::kLpm;
  EXPECT_EQ(engine_summary(backend, options, engine),
            "engine: cpu, context 1024, max-num-seqs 4, max-num-batched-tokens 64, prefix caching on, chunked prefill "
            "on, scheduling lpm, KV fp32 in blocks of 16");
  engine.speculation.method = SpeculativeMethod::kNgram;
  engine.speculation.num_speculative_tokens = 4;
  engine.speculation.prompt_lookup_max = 3;
  EXPECT_NE(engine_summary(backend, options, engine)
                .find(", speculative ngram k 4 (lookup 1..3, off above 8 decoding sequences)"),
            std::string::npos);
  EXPECT_EQ(startup_time_summary(2.314, {{"tokenizer", 0.05}, {"warm-up", 0.26}}),
            "ready in 2.31 s (tokenizer 0.05 s, warm-up 0.26 s)");
}

}  // namespace
}  // namespace qinfer::cli
