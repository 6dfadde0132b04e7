#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar_test_util.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

using testing::byte_vocab;
using testing::compile;
using testing::matches;

std::shared_ptr<const CompiledGrammar> gbnf(const std::string& text) { return compile(parse_gbnf(text), byte_vocab()); }

TEST(Gbnf, LiteralsClassesAndRepetition) {
  auto g = gbnf(R"(root ::= "a" [0-9]+ ("x" | "yz")? tail
tail ::= [^\n]{2,3} # comment
)");
  EXPECT_TRUE(matches(g, "a1xbb"));
  EXPECT_TRUE(matches(g, "a123yzbbb"));
  EXPECT_TRUE(matches(g, "a0cc"));
  EXPECT_FALSE(matches(g, "a1x"));
  EXPECT_FALSE(matches(g, "a1xbbbb"));
  EXPECT_FALSE(matches(g, "ab"));
}

TEST(Gbnf, RecursionAndContinuationLines) {
  auto g = gbnf(R"(root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list |
  [a-z]
)");
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[a,[b,[]],c]"));
  EXPECT_FALSE(matches(g, "[a,]"));
  EXPECT_FALSE(matches(g, "[[a]"));
}

TEST(Gbnf, EscapesAndUnicode) {
  auto g = gbnf(R"(root ::= "\x41\u00e9\n" [\u4e00-\u9fff] . "\"")");
  EXPECT_TRUE(matches(g, "A\xC3\xA9\n\xE4\xB8\xAD\xF0\x9F\x98\x80\""));
  EXPECT_FALSE(matches(g, "A\xC3\xA9\nx\xF0\x9F\x98\x80\""));
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    parse_gbnf(text);
    build_automaton(parse_gbnf(text));
    FAIL() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Gbnf, ErrorsNameThePlace) {
  expect_error("root ::= \"a\" undefined", "line 1, column 14: rule 'undefined' is used but not defined");
  expect_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
  expect_error("start ::= \"a\"", "no 'root' rule");
  expect_error("root ::= (\"a\"", "expected ')'");
  expect_error("root ::= \"a", "unterminated string literal");
  expect_error("root ::= [b-a]", "out of order");
  expect_error("root ::= root \"a\" | \"b\"", "left recursion through rule 'root'");
  expect_error("root ::= \"a\" root", "matches nothing");
}

TEST(Gbnf, NullableLoopsTerminate) {
  auto g = gbnf("root ::= (\"a\"?)* \"b\"");
  EXPECT_TRUE(matches(g, "aab"));
  EXPECT_TRUE(matches(g, "b"));
}

}  // namespace
}  // namespace qinfer::grammar
