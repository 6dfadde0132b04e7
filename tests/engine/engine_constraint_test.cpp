// Constrained decoding through the engine on the CPU backend (tiny random model, the real Qwen3 vocabulary): every
// output parses and follows its schema whatever the random model prefers, a constraint that cannot finish within
// max_tokens ends with "length", and logit_bias moves greedy choices as OpenAI's does.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/factory.h"
#include "engine/engine.h"
#include "engine/tokenizer_text_decoder.h"
#include "grammar/grammar_compiler.h"
#include "model/test_model.h"
#include "testing/engine_run.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qinfer {
namespace {

const std::filesystem::path kTokenizerJson =
    std::filesystem::path(QINFER_SOURCE_DIR) / ".assets" / "qwen3-tokenizer" / "tokenizer.json";

class EngineConstraint : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kTokenizerJson)) << "run tools/fetch-test-assets.sh";
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(kTokenizerJson));
    model_ = std::make_shared<const LoadedModel>(make_dummy_model(test_model_preset("tiny"), 7, nullptr));
    BackendOptions options;
    options.device = "cpu";
    options.max_model_len = 128;
    options.max_num_seqs = 4;
    options.num_threads = 2;
    backend_ = create_backend(model_, options);
    EngineOptions engine_options;
    engine_options.max_num_seqs = 4;
    engine_options.make_text_decoder = make_tokenizer_text_decoder(*tokenizer_);
    engine_ = std::make_unique<Engine>(*backend_, engine_options);
    compiler_ = std::make_unique<grammar::GrammarCompiler>(
        grammar::TokenVocabulary::from_tokenizer(*tokenizer_, model_->config.vocab_size, model_->config.eos_token_ids));
  }

  GenerationRequest request(const std::string& schema, float temperature, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = tokenizer_->encode("Answer in JSON:");
    r.sampling.temperature = temperature;
    r.seed = 11;
    r.max_tokens = max_tokens;
    r.constraint = compiler_->compile({grammar::Constraint::Kind::kJsonSchema, schema, {}});
    return r;
  }

  static std::string text_of(const std::vector<StreamDelta>& deltas, FinishReason& finish) {
    std::string text;
    for (const StreamDelta& d : deltas) {
      text += d.text;
      if (d.finish_reason != FinishReason::kNone) finish = d.finish_reason;
    }
    return text;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<const LoadedModel> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
};

TEST_F(EngineConstraint, OutputsFollowTheSchema) {
  const std::string schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"},
      "level": {"enum": ["low", "high"]}, "n": {"type": "integer", "minimum": 1, "maximum": 9}},
      "required": ["ok", "level", "n"]})";
  std::vector<GenerationRequest> requests = {request(schema, 0.0f, 40), request(schema, 1.0f, 40)};
  requests[1].n = 2;
  const auto outputs = run_to_completion(*engine_, requests);
  for (const auto& deltas : outputs) {
    for (int32_t index = 0; index < 2; ++index) {
      std::vector<StreamDelta> sample;
      for (const StreamDelta& d : deltas)
        if (d.index == index) sample.push_back(d);
      if (sample.empty()) continue;
      FinishReason finish = FinishReason::kNone;
      const std::string text = text_of(sample, finish);
      EXPECT_EQ(finish, FinishReason::kStop) << text;
      const auto doc = nlohmann::json::parse(text);
      EXPECT_TRUE(doc["ok"].is_boolean()) << text;
      EXPECT_TRUE(doc["level"] == "low" || doc["level"] == "high") << text;
      EXPECT_TRUE(doc["n"].is_number_integer() && doc["n"] >= 1 && doc["n"] <= 9) << text;
    }
  }
}

TEST_F(EngineConstraint, UnfinishableWithinMaxTokensEndsWithLength) {
  const auto outputs = run_to_completion(*engine_, {request(R"({"type": "array", "items": {"type": "string"},
      "minItems": 5})",
                                                            0.0f, 4)});
  FinishReason finish = FinishReason::kNone;
  const std::string text = text_of(outputs[0], finish);
  EXPECT_EQ(finish, FinishReason::kLength);
  EXPECT_FALSE(nlohmann::json::accept(text)) << text;
}

TEST_F(EngineConstraint, LogitBiasMovesGreedyChoices) {
  GenerationRequest plain;
  plain.prompt = tokenizer_->encode("Hello");
  plain.sampling.temperature = 0;
  plain.max_tokens = 3;
  plain.ignore_eos = true;
  const auto baseline = run_to_completion(*engine_, {plain});
  ASSERT_FALSE(baseline[0].empty());
  const int32_t first = baseline[0][0].token_ids[0];
  GenerationRequest banned = plain, forced = plain;
  banned.logit_bias = {{first, -100.0f}};
  forced.logit_bias = {{42, 100.0f}};
  const auto outputs = run_to_completion(*engine_, {banned, forced});
  EXPECT_NE(outputs[0][0].token_ids[0], first);
  for (const StreamDelta& d : outputs[1])
    for (int32_t id : d.token_ids) EXPECT_EQ(id, 42);
}

TEST_F(EngineConstraint, RefusesBadLogitBias) {
  GenerationRequest r;
  r.prompt = {1, 2};
  r.logit_bias = {{model_->config.vocab_size, 1.0f}};
  EXPECT_THROW(engine_->submit(r), Error);
  r.logit_bias = {{5, 101.0f}};
  EXPECT_THROW(engine_->submit(r), Error);
}

}  // namespace
}  // namespace qinfer
