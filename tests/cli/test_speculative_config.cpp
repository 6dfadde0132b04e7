// --speculative-config: vLLM's JSON read into SpeculativeConfig, and every refusal as `qinfer: error:` with exit 2
// before any model is loaded (serve, generate, bench latency and bench throughput take the flag).
#include <gtest/gtest.h>

#include "cli/speculative_config.h"
#include "run_qinfer.h"
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

TEST(SpeculativeConfigFlag, RefusesBadInputWithTheReason) {
  struct Case {
    const char* json;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"method": "ngram", "num_speculative_tokens": 4)", "not valid JSON"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"method": "medusa", "num_speculative_tokens": 4})", "unknown method 'medusa'"},
      {R"({"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4})",
       "draft_model is not supported yet"},
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
    EXPECT_NE(run.output.find("qinfer: error: --speculative-config: method draft_model is not supported yet"),
              std::string::npos)
        << command << "\n"
        << run.output;
  }
  // A good configuration passes the flags; the missing model is what stops it then (exit 3).
  const ProcessResult good = run_qinfer(
      R"(generate --prompt-ids 1,2 --model /nonexistent/model --speculative-config '{"method":"ngram","num_speculative_tokens":4}')");
  EXPECT_EQ(good.exit_code, 3) << good.output;
}

}  // namespace
}  // namespace qinfer::cli
