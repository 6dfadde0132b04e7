// Streaming decode: characters split across byte tokens are held back until complete; the deltas concatenate to
// Tokenizer::decode (checked against HF decodes in test_reference_corpus.cpp).
#include <gtest/gtest.h>

#include "testing/tokenizer_assets.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_detokenizer.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

// Id of the single-byte token for `byte` (byte-level vocab string of one character).
int32_t byte_token(const Tokenizer& tokenizer, unsigned char byte) {
  std::string name;
  utf8::append(name, byte_level::char_for_byte(byte));
  return tokenizer.token_id(name).value();
}

TEST(IncrementalDetokenizer, HoldsBytesUntilTheCharacterCompletes) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  IncrementalDetokenizer stream(*tokenizer);
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 'a')), "a");
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0xF0)), "");  // 😀 = F0 9F 98 80
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0x9F)), "");
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0x98)), "");
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.flush(), "");
}

TEST(IncrementalDetokenizer, BrokenSequencesBecomeReplacementCharacters) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  IncrementalDetokenizer stream(*tokenizer);
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0xE4)), "");
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 'x')), "\uFFFDx");
  EXPECT_EQ(stream.push(byte_token(*tokenizer, 0xE4)), "");
  EXPECT_EQ(stream.flush(), "\uFFFD");
}

TEST(IncrementalDetokenizer, SkipsSpecialTokensWhenAsked) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  const auto ids = tokenizer->encode("<think>\nhi 你好 👨‍👩‍👧</think><|im_end|>");
  for (bool skip : {true, false}) {
    IncrementalDetokenizer stream(*tokenizer, skip);
    std::string text;
    for (int32_t id : ids) text += stream.push(id);
    text += stream.flush();
    EXPECT_EQ(text, tokenizer->decode(ids, skip));
  }
  IncrementalDetokenizer skipping(*tokenizer, true);
  EXPECT_EQ(skipping.push(151645), "");         // <|im_end|> is special
  EXPECT_EQ(skipping.push(151667), "<think>");  // <think> is not
}

}  // namespace
}  // namespace qinfer
