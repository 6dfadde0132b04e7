#include <gtest/gtest.h>

#include "grammar/regex_parser.h"
#include "grammar_test_util.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> regex(const std::string& pattern) {
  return testing::compile(parse_regex(pattern), testing::byte_vocab());
}

TEST(Regex, WholeStringMatches) {
  auto r = regex(R"(^\d{3}-[A-Z]{2,}(?:x|yz)?$)");
  EXPECT_TRUE(testing::matches(r, "123-AB"));
  EXPECT_TRUE(testing::matches(r, "123-ABCyz"));
  EXPECT_FALSE(testing::matches(r, "123-A"));
  EXPECT_FALSE(testing::matches(r, "x123-AB"));
}

TEST(Regex, ClassesEscapesAndDot) {
  auto r = regex(R"([^\s,]+,\w\.\u00e9.)");
  EXPECT_TRUE(testing::matches(r, "ab,c.\xC3\xA9z"));
  EXPECT_FALSE(testing::matches(r, "a b,c.\xC3\xA9z"));
  EXPECT_FALSE(testing::matches(r, "ab,c.\xC3\xA9\n"));  // '.' excludes line terminators
  auto digits = regex(R"([\D]x)");
  EXPECT_TRUE(testing::matches(digits, "ax"));
  EXPECT_FALSE(testing::matches(digits, "1x"));
}

TEST(Regex, LazyQuantifiersMatchTheSameStrings) {
  auto r = regex("a+?b*?");
  EXPECT_TRUE(testing::matches(r, "aab"));
  EXPECT_FALSE(testing::matches(r, "b"));
}

TEST(Regex, UnsupportedFeaturesNamePosition) {
  for (auto [pattern, fragment] :
       std::vector<std::pair<std::string, std::string>>{{"a(?=b)", "position 3: lookaround"},
                                                        {"(a)\\1", "backreferences"},
                                                        {"\\bx", "word boundaries"},
                                                        {"a++", "possessive"},
                                                        {"(ab", "missing ')'"},
                                                        {"a)", "unmatched ')'"},
                                                        {"*a", "nothing to repeat"},
                                                        {"a^b", "'^' is only supported at the start"}}) {
    try {
      parse_regex(pattern);
      FAIL() << pattern;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << pattern << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("regex error at position"), std::string::npos);
    }
  }
}

TEST(Regex, JsonStringModeEscapes) {
  Grammar g;
  g.set_root(g.add_rule("root", regex_expression(g, R"(a"b\\.)", RegexOptions{true})));
  auto compiled = testing::compile(g, testing::byte_vocab());
  EXPECT_TRUE(testing::matches(compiled, R"(a\"b\\x)"));
  EXPECT_TRUE(testing::matches(compiled, R"(a\"b\\\")"));
  EXPECT_FALSE(testing::matches(compiled, R"(a"b\x)"));
}

}  // namespace
}  // namespace qinfer::grammar
