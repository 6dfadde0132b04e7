#include "grammar/text_cursor.h"

#include "util/error.h"
#include "util/utf8.h"

namespace qinfer::grammar {

constexpr int32_t kMaxRepeat = 100000;

bool TextCursor::consume(std::string_view s) {
  if (text_.substr(pos_, s.size()) != s) return false;
  pos_ += s.size();
  return true;
}

uint32_t TextCursor::next_codepoint() {
  // Shortest form only, no surrogates, at most U+10FFFF (util/utf8.h).
  if (utf8::valid_sequence_length(text_, pos_) == 0) fail("invalid UTF-8");
  return utf8::decode_valid(text_, pos_);
}

int32_t TextCursor::control_escape(char letter) {
  switch (letter) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case '0':
      return 0;
    default:
      return -1;
  }
}

uint32_t TextCursor::parse_hex(int digits) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = peek();
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
    advance();
    value = value * 16 + static_cast<uint32_t>(d);
  }
  if (value > 0x10FFFF) fail("code point out of range");
  return value;
}

std::pair<int32_t, int32_t> TextCursor::parse_bounds() {
  const auto number = [&]() -> int32_t {
    if (!(peek() >= '0' && peek() <= '9')) return -1;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (next() - '0');
      if (v > kMaxRepeat) fail("repetition bound over " + std::to_string(kMaxRepeat));
    }
    return static_cast<int32_t>(v);
  };
  int32_t min = number(), max = min;
  if (consume(",")) {
    max = number();
    if (min < 0) min = 0;
  } else if (min < 0) {
    fail("expected a repetition count");
  }
  if (!consume("}")) fail("expected '}' closing the repetition");
  if (max >= 0 && max < min) fail("repetition maximum below its minimum");
  return {min, max};
}

void TextCursor::fail(const std::string& message) const {
  std::string where;
  if (multiline_) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    where = "line " + std::to_string(line) + ", column " + std::to_string(column);
  } else {
    where = "position " + std::to_string(pos_);
  }
  throw Error(ErrorKind::kInvalidArgument, what_ + " error at " + where + ": " + message);
}

}  // namespace qinfer::grammar
