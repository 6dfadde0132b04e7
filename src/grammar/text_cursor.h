// Reading position in grammar or regex source text, with errors that name the place: "grammar error at line 3,
// column 7: ..." for multi-line sources, "regex error at position 5: ..." for one-line ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace qinfer::grammar {

class TextCursor {
 public:
  TextCursor(std::string_view text, std::string what, bool multiline = true)
      : text_(text), what_(std::move(what)), multiline_(multiline) {}

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void advance() { ++pos_; }
  char next() { return text_[pos_++]; }
  size_t position() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  bool consume(std::string_view s);
  // One UTF-8 encoded code point (invalid bytes are an error).
  uint32_t next_codepoint();
  // The code point of a one-letter escape shared by GBNF and regexes (\n \r \t \f \v \0), -1 for other letters.
  static int32_t control_escape(char letter);
  // `digits` hex digits as a code point.
  uint32_t parse_hex(int digits);
  // After '{': "m}", "m,}", "m,n}" or ",n}"; max is -1 when unbounded.
  std::pair<int32_t, int32_t> parse_bounds();
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string_view text_;
  std::string what_;
  bool multiline_;
  size_t pos_ = 0;
};

}  // namespace qinfer::grammar
