// Text streaming with the real Qwen3 tokenizer (tools/fetch-test-assets.sh puts it under .assets/): the fake model
// generates ids across the whole vocabulary, so deltas cross UTF-8 characters split over tokens. References come
// from the tokenizer itself (Tokenizer::decode, IncrementalDetokenizer), not from the engine.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "engine/engine.h"
#include "engine/tokenizer_text_decoder.h"
#include "testing/fake_backend.h"
#include "tokenizer/incremental_detokenizer.h"

namespace qinfer::testing {
namespace {

const std::filesystem::path kTokenizerJson =
    std::filesystem::path(QINFER_SOURCE_DIR) / ".assets" / "qwen3-tokenizer" / "tokenizer.json";

class EngineText : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kTokenizerJson))
        << kTokenizerJson << " is missing: run tools/fetch-test-assets.sh";
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(kTokenizerJson));
    spec_.vocab_size = tokenizer_->vocab_size();
    spec_.eos_token_ids = {151645, 151643};
    spec_.num_blocks = 256;
    spec_.block_size = 16;
    spec_.max_model_len = 512;
    backend_ = std::make_unique<FakeBackend>(spec_);
    EngineOptions options;
    options.max_num_seqs = 8;
    options.max_num_batched_tokens = 64;
    options.make_text_decoder = make_tokenizer_text_decoder(*tokenizer_);
    engine_ = std::make_unique<Engine>(*backend_, options);
  }

  GenerationRequest request(int32_t first_id) const {
    GenerationRequest r;
    r.prompt.resize(20);
    std::iota(r.prompt.begin(), r.prompt.end(), first_id);
    r.sampling.temperature = 0.0f;
    r.max_tokens = 60;
    r.ignore_eos = true;
    return r;
  }

  std::vector<int32_t> reference_tokens(const GenerationRequest& r) const {
    return fake_reference_generate(r.prompt, r.sampling, FakeGeneration{*r.max_tokens, true, {}}, spec_);
  }

  std::pair<std::string, std::vector<int32_t>> run(const GenerationRequest& r, FinishReason* finish) {
    RequestHandle handle = engine_->submit(r);
    while (engine_->step() || engine_->has_work()) {
    }
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<StreamDelta> deltas;
    while (handle.stream->wait_drain(deltas, std::chrono::milliseconds(0))) {
    }
    for (const StreamDelta& delta : deltas) {
      text += delta.text;
      tokens.insert(tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
      *finish = delta.finish_reason;
    }
    return {text, tokens};
  }

  FakeModelSpec spec_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineText, StreamedTextEqualsDecodeOfTheTokens) {
  for (int32_t first : {1000, 90000, 150000}) {
    GenerationRequest r = request(first);
    FinishReason finish = FinishReason::kNone;
    auto [text, tokens] = run(r, &finish);
    EXPECT_EQ(tokens, reference_tokens(r));
    EXPECT_EQ(text, tokenizer_->decode(tokens, /*skip_special_tokens=*/true));
    EXPECT_EQ(finish, FinishReason::kLength);
  }
}

TEST_F(EngineText, StopStringAcrossTokensCutsTheTextAndTheGeneration) {
  GenerationRequest r = request(5000);
  std::vector<int32_t> tokens = reference_tokens(r);
  // Text released after each token, from the tokenizer's own incremental detokenizer.
  IncrementalDetokenizer detokenizer(*tokenizer_);
  std::vector<std::string> prefix_text;
  std::string text;
  for (int32_t token : tokens) prefix_text.push_back(text += detokenizer.push(token));
  // A stop string that starts in the text of token 10 and ends in a later token's text.
  size_t start = prefix_text[9].size();
  ASSERT_GT(text.size(), start + 6);
  std::string stop = text.substr(start, 6);
  size_t first = text.find(stop);
  size_t last_token = 0;
  while (prefix_text[last_token].size() < first + stop.size() ||
         prefix_text[last_token].find(stop) == std::string::npos)
    ++last_token;

  r.stop = {stop};
  FinishReason finish = FinishReason::kNone;
  auto [streamed, streamed_tokens] = run(r, &finish);
  EXPECT_EQ(streamed, text.substr(0, first));
  EXPECT_EQ(streamed_tokens, std::vector<int32_t>(tokens.begin(), tokens.begin() + last_token + 1));
  EXPECT_EQ(finish, FinishReason::kStop);
}

}  // namespace
}  // namespace qinfer::testing
