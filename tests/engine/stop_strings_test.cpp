#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace qinfer {
namespace {

TEST(StopStrings, HoldsBackAPossibleStartAndStopsAcrossPieces) {
  StopStringMatcher matcher({"END"});
  auto a = matcher.push("hello E");
  EXPECT_EQ(a.text, "hello ");  // "E" might start "END"
  EXPECT_FALSE(a.stopped);
  auto b = matcher.push("N");
  EXPECT_EQ(b.text, "");
  auto c = matcher.push("D and more");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(matcher.push("x").text, "");
}

TEST(StopStrings, ReleasesHeldTextWhenTheStartDoesNotContinue) {
  StopStringMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("xE").text, "x");
  EXPECT_EQ(matcher.push("Nd").text, "ENd");
  EXPECT_EQ(matcher.push("EN").text, "");
  EXPECT_EQ(matcher.flush(), "EN");
}

TEST(StopStrings, EarliestOfSeveralStopsWins) {
  StopStringMatcher matcher({"cd", "abc", "zz"});
  auto result = matcher.push("xxabcd");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.text, "xx");
}

TEST(StopStrings, StopInsideOnePieceKeepsTheTextBefore) {
  StopStringMatcher matcher({"\n\n"});
  auto result = matcher.push("line one\n\nline two");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.text, "line one");
}

TEST(StopStrings, RepeatedCharactersHoldTheLongestPossibleStart) {
  StopStringMatcher matcher({"aab"});
  EXPECT_EQ(matcher.push("xaa").text, "x");
  EXPECT_EQ(matcher.push("a").text, "a");  // "aaa": only the last "aa" can still start "aab"
  auto result = matcher.push("b");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.text, "");
}

}  // namespace
}  // namespace qinfer
