// The matcher over the real Qwen3 vocabulary (151 643 BPE pieces, added tokens, a model vocabulary of 151 936):
// cached masks equal brute-force masks along a JSON document, and special tokens are never allowed.
#include <gtest/gtest.h>

#include <chrono>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "testing/tokenizer_assets.h"

namespace qinfer::grammar {
namespace {

TEST(Qwen3Vocab, MasksAlongADocumentEqualBruteForce) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  auto vocab = TokenVocabulary::from_tokenizer(*tokenizer, 151936, {151645, 151643});
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
      "required": ["city", "days"]})");
  auto g = testing::compile(json_schema_grammar(schema), vocab);
  GrammarMatcher m(g);
  const std::string doc = "{\"city\": \"Z\xC3\xBCrich \xE6\x9D\xB1\xE4\xBA\xAC\", \"days\": 12}";
  const std::vector<int32_t> ids = tokenizer->encode(doc);
  double slowest = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<uint32_t> fast = testing::fast_mask(m);
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_EQ(testing::allowed_ids(fast), testing::allowed_ids(testing::brute_force_mask(m))) << "token " << i;
    for (int32_t special = 151643; special < 151669; ++special) {
      if (tokenizer->is_special(special) && special != 151645 && special != 151643) {
        EXPECT_FALSE(fast[static_cast<size_t>(special) / 32] >> (special % 32) & 1u);
      }
    }
    if (i < ids.size()) {
      ASSERT_TRUE(m.accept_token(ids[i])) << "token " << i;
    }
  }
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.accept_token(151645));
  std::printf("slowest mask (first use of a state included): %.2f ms\n", slowest * 1e3);
}

}  // namespace
}  // namespace qinfer::grammar
