// --speculative-config: vLLM's JSON read into SpeculativeConfig, and every refusal as `qinfer: error:` with exit 2
// before any model is loaded (serve, generate, bench latency and bench throughput take the flag).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/speculative_config.h"
#include "testing/run_qinfer.h"
#include "util/error.h"

namespace qinfer::cli {
namespace {

TEST(SpeculativeConfigFlag, ReadsVllmJson) {
  EXPECT_FALSE(parse_speculative_config("").enabled());
  const SpeculativeConfig full = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5, "prompt_lookup_min": 2,
          "disable_by_batch_size": 3})");
  EXPECT_EQ(full.method, SpeculativeMethod::kNgram);
  EXPECT_EQ(full.num_speculative_tokens, 4);
  EXPECT_EQ(full.prompt_lookup_min, 2);
  EXPECT_EQ(full.prompt_lookup_max, 5);
  EXPECT_EQ(full.disable_by_batch_size, 3);
  const SpeculativeConfig defaults = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 16})");
  EXPECT_EQ(defaults.prompt_lookup_min, 1);
  EXPECT_EQ(defaults.prompt_lookup_max, 4);
  EXPECT_EQ(defaults.disable_by_batch_size, 8);
  // One bound alone: the other follows it where they would cross.
  EXPECT_EQ(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_min":6})")
                .prompt_lookup_max,
            6);
  EXPECT_EQ(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":2})")
                .prompt_lookup_min,
            1);
}

TEST(SpeculativeConfigFlag, ReadsTheDraftModelSpellings) {
  const SpeculativeConfig draft = parse_speculative_config(
      R"({"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 5,
          "disable_by_batch_size": 2})");
  EXPECT_EQ(draft.method, SpeculativeMethod::kDraftModel);
  EXPECT_EQ(draft.draft_model, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(draft.num_speculative_tokens, 5);
  EXPECT_EQ(draft.disable_by_batch_size, 2);
  // vLLM infers the method from the model, and older releases called it speculative_model.
  const SpeculativeConfig inferred =
      parse_speculative_config(R"({"speculative_model": "d", "num_speculative_tokens": 3})");
  EXPECT_EQ(inferred.method, SpeculativeMethod::kDraftModel);
  EXPECT_EQ(inferred.draft_model, "d");
  const SpeculativeConfig shaped = parse_speculative_config(
      R"({"method": "draft_model", "model": "0.6b-shape", "config": "c.json", "num_speculative_tokens": 1})");
  EXPECT_EQ(shaped.draft_config, "c.json");
}

TEST(SpeculativeConfigFlag, RefusesBadInputWithTheReason) {
  struct Case {
    const char* json;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"method": "ngram", "num_speculative_tokens": 4)", "not valid JSON"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"method": "medusa", "num_speculative_tokens": 4})", "unknown method 'medusa'"},
      {R"({"method": "draft_model", "num_speculative_tokens": 4})", "method draft_model needs \"model\""},
      {R"({"method": "draft_model", "model": "m", "num_speculative_tokens": 17})",
       "num_speculative_tokens must be in [1, 16], got 17"},
      {R"({"method": "draft_model", "model": "m", "num_speculative_tokens": 4, "prompt_lookup_max": 2})",
       "unknown key 'prompt_lookup_max'"},
      {R"({"model": "m", "speculative_model": "n", "num_speculative_tokens": 4})", "not both"},
      {R"({"num_speculative_tokens": 4})", "method must be given"},
      {R"({"method": "ngram"})", "num_speculative_tokens is required"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens must be in [1, 16], got 0"},
      {R"({"method": "ngram", "num_speculative_tokens": 17})", "num_speculative_tokens must be in [1, 16], got 17"},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})", "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 3})",
       "prompt_lookup_min (5) must not exceed prompt_lookup_max (3)"},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "lookahead": 2})", "unknown key 'lookahead'"},
  };
  for (const Case& c : cases) {
    try {
      parse_speculative_config(c.json);
      ADD_FAILURE() << c.json << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << c.json;
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << c.json << ": " << e.what();
    }
  }
}

TEST(SpeculativeConfigFlag, CommandsExitTwoBeforeLoadingTheModel) {
  const std::string bad = R"('{"method": "draft_model", "num_speculative_tokens": 4}')";
  for (const char* command : {"serve", "generate --prompt-ids 1,2", "bench latency", "bench throughput"}) {
    const ProcessResult run =
        run_qinfer(std::string(command) + " --model /nonexistent/model --speculative-config " + bad);
    EXPECT_EQ(run.exit_code, 2) << command << "\n" << run.output;
    EXPECT_NE(run.output.find("qinfer: error: --speculative-config: method draft_model needs \"model\""),
              std::string::npos)
        << command << "\n"
        << run.output;
  }
  // A good configuration passes the flags; the missing model is what stops it then (exit 3).
  const ProcessResult good = run_qinfer(
      R"(generate --prompt-ids 1,2 --model /nonexistent/model --speculative-config '{"method":"ngram","num_speculative_tokens":4}')");
  EXPECT_EQ(good.exit_code, 3) << good.output;
}

// generate and bench latency with the flag on a generated tiny model: the same tokens and logprobs as without it, and
// the speculative report.
TEST(SpeculativeConfigFlag, GenerateAndBenchLatencyRunWithIt) {
  const std::filesystem::path model =
      std::filesystem::temp_directory_path() / ("qinfer-cli-spec-" + std::to_string(::getpid()));
  const ProcessResult made = run_qinfer("make-test-model --preset tiny --seed 3 --out " + model.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string prompt = "1,2,3,4,5,1,2,3,4,5,1,2,3,4,5,1,2,3";
  const std::string generate = "generate --device cpu --threads 2 --model " + model.string() + " --prompt-ids " +
                               prompt + " --max-tokens 24 --ignore-eos --json --seed 11 --temperature 0.8";
  const std::string spec = R"( --speculative-config '{"method": "ngram", "num_speculative_tokens": 4}')";
  const ProcessResult plain = run_qinfer(generate);
  const ProcessResult speculative = run_qinfer(generate + spec);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(speculative.exit_code, 0) << speculative.output;
  EXPECT_EQ(speculative.output, plain.output);
  const ProcessResult bench = run_qinfer("bench latency --device cpu --threads 2 --model " + model.string() +
                                         " --input-len 32 --output-len 24 --prompt-period 4" + spec);
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("tokens per sequence step"), std::string::npos) << bench.output;
  EXPECT_NE(bench.output.find("mean accepted length"), std::string::npos) << bench.output;
  std::filesystem::remove_all(model);
}

// The draft_model method through the commands: the model as its own draft and another random model give generate's
// greedy tokens and logprobs unchanged, a seeded sampled run repeats itself, bench latency reports the draft's cost,
// and a draft of another vocabulary exits 5.
TEST(SpeculativeConfigFlag, DraftModelThroughTheCommands) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("qinfer-cli-draft-" + std::to_string(::getpid()));
  const fs::path target = dir / "target", other = dir / "other";
  ASSERT_EQ(run_qinfer("make-test-model --preset tiny --seed 3 --out " + target.string()).exit_code, 0);
  ASSERT_EQ(run_qinfer("make-test-model --preset tiny-untied --seed 4 --out " + other.string()).exit_code, 0);
  auto spec = [](const fs::path& draft) {
    return R"( --speculative-config '{"method": "draft_model", "model": ")" + draft.string() +
           R"(", "num_speculative_tokens": 3}')";
  };
  const std::string generate = "generate --device cpu --threads 2 --model " + target.string() +
                               " --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 20 --ignore-eos --json";
  const ProcessResult plain = run_qinfer(generate + " --temperature 0");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  for (const fs::path& draft : {target, other}) {
    const ProcessResult speculative = run_qinfer(generate + " --temperature 0" + spec(draft));
    ASSERT_EQ(speculative.exit_code, 0) << speculative.output;
    EXPECT_EQ(speculative.output, plain.output) << draft;
  }
  const std::string sampled = generate + " --temperature 0.9 --seed 5" + spec(other);
  const ProcessResult first = run_qinfer(sampled), second = run_qinfer(sampled);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  const ProcessResult bench = run_qinfer("bench latency --device cpu --threads 2 --model " + target.string() +
                                         " --input-len 16 --output-len 12" + spec(target));
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("ms per proposed token"), std::string::npos) << bench.output;
  EXPECT_NE(bench.output.find("verify:"), std::string::npos) << bench.output;
  // Another vocabulary: a dummy draft from a config.json that says so.
  const fs::path config = dir / "other-vocab.json";
  {
    std::ifstream in(other / "config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"vocab_size\": 151936");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, 20, "\"vocab_size\": 152064");
    std::ofstream(config) << text;
  }
  const ProcessResult refused = run_qinfer(
      "generate --device cpu --load-format dummy --preset tiny --prompt-ids 1,2 --max-tokens 2" + spec(config));
  EXPECT_EQ(refused.exit_code, 5) << refused.output;
  EXPECT_NE(refused.output.find("vocabulary"), std::string::npos) << refused.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qinfer::cli
