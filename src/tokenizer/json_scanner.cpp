#include "tokenizer/json_scanner.h"

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace qinfer {

void JsonScanner::fail(const std::string& message) const {
  throw Error(ErrorKind::kFormat, file_.string() + ": invalid JSON at byte " + std::to_string(pos_) + ": " + message);
}

void JsonScanner::skip_space() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
    ++pos_;
  }
}

char JsonScanner::peek() {
  skip_space();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

void JsonScanner::expect(char c) {
  if (peek() != c) fail(std::string("expected '") + c + "'");
  ++pos_;
}

bool JsonScanner::consume_if(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

uint32_t JsonScanner::hex4() {
  if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = text_[pos_++];
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      value |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      fail("bad hex digit in \\u escape");
    }
  }
  return value;
}

std::string_view JsonScanner::string_value(std::string& storage) {
  expect('"');
  const size_t begin = pos_;
  while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\') ++pos_;
  if (pos_ >= text_.size()) fail("unterminated string");
  if (text_[pos_] == '"') return text_.substr(begin, pos_++ - begin);
  storage.assign(text_.substr(begin, pos_ - begin));
  while (true) {
    if (pos_ >= text_.size()) fail("unterminated string");
    const char c = text_[pos_++];
    if (c == '"') return storage;
    if (c != '\\') {
      storage.push_back(c);
      continue;
    }
    if (pos_ >= text_.size()) fail("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case '"':
        storage.push_back('"');
        break;
      case '\\':
        storage.push_back('\\');
        break;
      case '/':
        storage.push_back('/');
        break;
      case 'b':
        storage.push_back('\b');
        break;
      case 'f':
        storage.push_back('\f');
        break;
      case 'n':
        storage.push_back('\n');
        break;
      case 'r':
        storage.push_back('\r');
        break;
      case 't':
        storage.push_back('\t');
        break;
      case 'u': {
        uint32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00) {
          if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') fail("lone surrogate");
          pos_ += 2;
          const uint32_t low = hex4();
          if (low < 0xDC00 || low > 0xDFFF) fail("lone surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          fail("lone surrogate");
        }
        utf8::append(storage, cp);
        break;
      }
      default:
        fail(std::string("bad escape \\") + e);
    }
  }
}

int64_t JsonScanner::integer_value() {
  skip_space();
  const size_t begin = pos_;
  bool negative = false;
  if (pos_ < text_.size() && text_[pos_] == '-') {
    negative = true;
    ++pos_;
  }
  int64_t value = 0;
  size_t digits = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' && digits < 18) {
    value = value * 10 + (text_[pos_++] - '0');
    ++digits;
  }
  if (digits == 0 || (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E' ||
                                              (text_[pos_] >= '0' && text_[pos_] <= '9')))) {
    pos_ = begin;
    fail("expected an integer");
  }
  return negative ? -value : value;
}

void JsonScanner::skip_string() {
  ++pos_;  // opening quote
  while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
  if (pos_ >= text_.size()) fail("unterminated string");
  ++pos_;
}

std::string_view JsonScanner::raw_value() {
  skip_space();
  const size_t begin = pos_;
  if (pos_ >= text_.size()) fail("unexpected end of text");
  const char first = text_[pos_];
  if (first == '"') {
    skip_string();
  } else if (first == '{' || first == '[') {
    int depth = 0;
    while (true) {
      if (pos_ >= text_.size()) fail("unexpected end of text");
      const char c = text_[pos_];
      if (c == '"') {
        skip_string();
        continue;
      }
      ++pos_;
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) break;
    }
  } else {
    // A number, true, false or null: runs to the next delimiter; nlohmann validates it later.
    constexpr std::string_view kDelimiters = ",}] \t\r\n";
    while (pos_ < text_.size() && kDelimiters.find(text_[pos_]) == std::string_view::npos) ++pos_;
  }
  return text_.substr(begin, pos_ - begin);
}

}  // namespace qinfer
