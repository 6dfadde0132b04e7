// SseReader against the event-stream rules: any chunking, LF/CRLF/CR line ends, comments, multi-line data.
#include "loadgen/sse_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qinfer::loadgen {
namespace {

std::vector<std::string> read_all(const std::vector<std::string_view>& chunks, SseReader& reader) {
  std::vector<std::string> events;
  for (std::string_view chunk : chunks) reader.feed(chunk, [&](std::string_view data) { events.emplace_back(data); });
  return events;
}

std::vector<std::string> read_all(const std::vector<std::string_view>& chunks) {
  SseReader reader;
  return read_all(chunks, reader);
}

TEST(SseReader, OpenAiStream) {
  EXPECT_EQ(read_all({"data: {\"a\":1}\n\ndata: [DONE]\n\n"}), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
}

TEST(SseReader, EverySplitPointGivesTheSameEvents) {
  const std::string body =
      ": keep-alive\r\n\r\ndata: one\r\n\r\ndata:two\ndata: lines\n\nevent: x\nid: 3\ndata: [DONE]\r\r";
  const std::vector<std::string> expected = {"one", "two\nlines", "[DONE]"};
  for (size_t a = 0; a <= body.size(); ++a)
    for (size_t b = a; b <= body.size(); b += 7) {
      const std::string_view all = body;
      EXPECT_EQ(read_all({all.substr(0, a), all.substr(a, b - a), all.substr(b)}), expected) << a << " " << b;
    }
}

TEST(SseReader, ByteByByte) {
  const std::string body = "data: x\r\n\r\ndata: y\n\n";
  SseReader reader;
  std::vector<std::string> events;
  for (char c : body) reader.feed(std::string_view(&c, 1), [&](std::string_view data) { events.emplace_back(data); });
  EXPECT_EQ(events, (std::vector<std::string>{"x", "y"}));
}

TEST(SseReader, CommentsAndEventsWithoutDataAreNotDispatched) {
  EXPECT_TRUE(read_all({": ping\n\nevent: update\n\n\n\n"}).empty());
}

TEST(SseReader, OnlyOneLeadingSpaceIsStripped) {
  EXPECT_EQ(read_all({"data:  two spaces\n\n"}), (std::vector<std::string>{" two spaces"}));
  EXPECT_EQ(read_all({"data\n\n"}), (std::vector<std::string>{""}));  // a data field without value
}

TEST(SseReader, CrLfSplitAcrossChunksIsOneLineEnd) {
  // "\r" ends one chunk and "\n" starts the next: one line end, not a blank line that would dispatch early.
  EXPECT_EQ(read_all({"data: a\r", "\ndata: b\r\n\r\n"}), (std::vector<std::string>{"a\nb"}));
}

TEST(SseReader, PartialEventAtTheEnd) {
  SseReader reader;
  EXPECT_TRUE(read_all({"data: complete\n\ndata: cut"}, reader).size() == 1);
  EXPECT_TRUE(reader.has_partial_event());
  SseReader finished;
  read_all({"data: complete\n\n"}, finished);
  EXPECT_FALSE(finished.has_partial_event());
}

}  // namespace
}  // namespace qinfer::loadgen
