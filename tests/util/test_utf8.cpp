// UTF-8 helpers against Rust's String::from_utf8_lossy behaviour (maximal subparts → one U+FFFD each); the expected
// strings follow the Unicode Standard's worked example (Table 3-8 in chapter 3).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/utf8.h"

namespace qinfer {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsKept) {
  EXPECT_TRUE(utf8::is_valid("plain ascii"));
  EXPECT_TRUE(utf8::is_valid("中文 😀 é"));
  EXPECT_EQ(utf8::to_valid_lossy("中文 😀"), "中文 😀");
}

TEST(Utf8, MaximalSubpartsBecomeOneReplacementEach) {
  // Unicode 15 §3.9 Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 → a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
  const std::string input = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  EXPECT_FALSE(utf8::is_valid(input));
  EXPECT_EQ(utf8::to_valid_lossy(input), "a" + kFFFD + kFFFD + kFFFD + "b" + kFFFD + "c" + kFFFD + kFFFD + "d");
}

TEST(Utf8, SurrogatesOverlongAndOutOfRangeAreInvalid) {
  EXPECT_EQ(utf8::to_valid_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // CESU-8 encoded U+D800
  EXPECT_EQ(utf8::to_valid_lossy("\xC0\xAF"), kFFFD + kFFFD);              // overlong '/'
  EXPECT_EQ(utf8::to_valid_lossy("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);
  EXPECT_EQ(utf8::to_valid_lossy("\xE4\xB8"), kFFFD);  // truncated 中
}

TEST(Utf8, StablePrefixHoldsBackAnIncompleteCharacter) {
  const std::string zhong = "\xE4\xB8\xAD";  // 中
  EXPECT_EQ(utf8::stable_prefix_length("ab"), 2u);
  EXPECT_EQ(utf8::stable_prefix_length("ab\xE4"), 2u);
  EXPECT_EQ(utf8::stable_prefix_length("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::stable_prefix_length("ab" + zhong), 5u);
  EXPECT_EQ(utf8::stable_prefix_length("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8::stable_prefix_length("ab\xE4\x41"), 4u);  // already invalid: nothing to wait for
  EXPECT_EQ(utf8::stable_prefix_length("\x80"), 1u);
}

TEST(Utf8, LenientDecodingReadsAnInvalidByteAsItself) {
  const std::string text = "a\xC3\xA9\xFF\xED\xA0\x80\xE4\xB8\xAD";  // a é, a stray byte, CESU-8 U+D800, 中
  std::vector<char32_t> code_points;
  size_t pos = 0;
  while (pos < text.size()) code_points.push_back(utf8::decode_lenient(text, pos));
  EXPECT_EQ(code_points, (std::vector<char32_t>{'a', 0xE9, 0xFF, 0xED, 0xA0, 0x80, 0x4E2D}));
  EXPECT_EQ(utf8::count_code_points(text), code_points.size());
  EXPECT_EQ(utf8::count_code_points(""), 0u);
}

TEST(Utf8, PreviousStartStepsBackOneCodePoint) {
  const std::string text = "a\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a 中 😀
  EXPECT_EQ(utf8::previous_start(text, text.size()), 4u);
  EXPECT_EQ(utf8::previous_start(text, 4), 1u);
  EXPECT_EQ(utf8::previous_start(text, 1), 0u);
  std::string encoded;
  for (char32_t cp : {U'a', U'\u00E9', U'\u4E2D', U'\U0001F600'}) utf8::append(encoded, cp);
  EXPECT_EQ(encoded, "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace qinfer
