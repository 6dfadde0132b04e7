#include "chat_template/jinja/lexer.h"

#include <charconv>
#include <cstdlib>

#include "chat_template/jinja/utf8_text.h"
#include "util/error.h"
#include "util/utf8.h"

namespace qinfer::jinja {

namespace {

[[noreturn]] void syntax_error(int line, const std::string& message) {
  throw Error(ErrorKind::kFormat, "template syntax error at line " + std::to_string(line) + ": " + message);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2 normalises every newline sequence in data and string literals to "\n"; doing it once up front keeps the
// line count identical.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  return out;
}

int count_newlines(std::string_view text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string decode_string_literal(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    auto hex_escape = [&](int digits) {
      if (i + digits >= body.size()) {
        syntax_error(line, "truncated \\" + std::string(1, e) + " escape in string literal");
      }
      uint32_t cp = 0;
      for (int k = 1; k <= digits; ++k) {
        const char h = body[i + k];
        uint32_t v = 0;
        if (h >= '0' && h <= '9') {
          v = h - '0';
        } else if (h >= 'a' && h <= 'f') {
          v = h - 'a' + 10;
        } else if (h >= 'A' && h <= 'F') {
          v = h - 'A' + 10;
        } else {
          syntax_error(line, "invalid \\" + std::string(1, e) + " escape in string literal");
        }
        cp = cp * 16 + v;
      }
      if (cp > 0x10FFFF) syntax_error(line, "escape beyond U+10FFFF in string literal");
      i += digits;
      utf8::append(out, cp);
    };
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        hex_escape(2);
        break;
      case 'u':
        hex_escape(4);
        break;
      case 'U':
        hex_escape(8);
        break;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          utf8::append(out, cp);
        } else {
          out += '\\';  // Python keeps unknown escapes as written
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();  // keep_trailing_newline=False
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string_view text(src_.data() + pos_, (tag == std::string::npos ? src_.size() : tag) - pos_);
      if (tag == std::string::npos) {
        emit_text(text);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      text = strip_before_tag(text, kind, modifier, line_starting);
      emit_text(text);
      line_ += count_newlines(std::string_view(src_.data() + pos_, tag - pos_));
      pos_ = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        line_starting = skip_comment();
      } else if (kind == '%' && try_raw_block(tag)) {
        line_starting = last_end_consumed_newline_;
      } else {
        line_starting = lex_tag(kind);
      }
    }
    tokens_.push_back(Token{Token::Type::kEnd, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  static std::string_view strip_before_tag(std::string_view text, char kind, char modifier, bool line_starting) {
    if (modifier == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      return text.substr(0, end);
    }
    if (kind == '{' || modifier == '+') return text;
    // lstrip_blocks: the tag starts its line after only spaces/tabs.
    const size_t line_begin = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
    if (line_begin == 0 && !line_starting) return text;
    for (size_t i = line_begin; i < text.size(); ++i) {
      if (!is_space(text[i])) return text;
    }
    return text.substr(0, line_begin);
  }

  void emit_text(std::string_view text) {
    if (text.empty()) return;
    tokens_.push_back(Token{Token::Type::kText, std::string(text), 0, 0, line_});
  }

  // After a block or comment end: `-` strips all following whitespace; otherwise trim_blocks drops one newline
  // unless `+` asked to keep it. Returns whether the consumed suffix ended with a newline.
  bool after_block_end(char modifier) {
    const size_t start = pos_;
    if (modifier == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (modifier != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_newlines(std::string_view(src_.data() + start, pos_ - start));
    return pos_ > start && src_[pos_ - 1] == '\n';
  }

  bool skip_comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) syntax_error(line_, "comment is not closed with #}");
    const char modifier = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    line_ += count_newlines(std::string_view(src_.data() + pos_, end - pos_));
    pos_ = end + 2;
    return after_block_end(modifier);
  }

  // Matches `[-+]? \s* NAME \s* [-+]? %}` at `from`; on success returns the position after `%}` and the end
  // modifier.
  bool match_simple_tag(size_t from, std::string_view name, size_t& after, char& end_modifier) const {
    size_t p = from;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, name.size(), name) != 0) return false;
    p += name.size();
    if (p < src_.size() && is_name_char(src_[p])) return false;
    while (p < src_.size() && is_space(src_[p])) ++p;
    end_modifier = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_modifier = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    after = p + 2;
    return true;
  }

  bool try_raw_block(size_t tag) {
    size_t after = 0;
    char end_modifier = '\0';
    if (!match_simple_tag(pos_, "raw", after, end_modifier)) return false;
    line_ += count_newlines(std::string_view(src_.data() + pos_, after - pos_));
    pos_ = after;
    after_block_end(end_modifier);
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 2)) {
      const char modifier = p + 2 < src_.size() ? src_[p + 2] : '\0';
      const size_t name_from = p + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (!match_simple_tag(name_from, "endraw", after, end_modifier)) continue;
      std::string_view body(src_.data() + pos_, p - pos_);
      body = strip_before_tag(body, '%', modifier, false);
      emit_text(body);
      line_ += count_newlines(std::string_view(src_.data() + pos_, after - pos_));
      pos_ = after;
      last_end_consumed_newline_ = after_block_end(end_modifier);
      return true;
    }
    syntax_error(line_at(tag), "{% raw %} is not closed with {% endraw %}");
  }

  int line_at(size_t offset) const { return 1 + count_newlines(std::string_view(src_.data(), offset)); }

  // Tokens of one {{ ... }} or {% ... %}; returns whether the end consumed a trailing newline.
  bool lex_tag(char kind) {
    const int begin_line = line_;
    tokens_.push_back(
        Token{kind == '{' ? Token::Type::kVariableBegin : Token::Type::kBlockBegin, "", 0, 0, begin_line});
    const char closer = kind == '{' ? '}' : '%';
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        syntax_error(begin_line, std::string("tag is not closed with ") + (kind == '{' ? "}}" : "%}"));
      }
      if (depth == 0) {
        char modifier = '\0';
        size_t p = pos_;
        if ((src_[p] == '-' || src_[p] == '+') && p + 2 < src_.size() && src_[p + 1] == closer && src_[p + 2] == '}') {
          modifier = src_[p];
          ++p;
        }
        if (p + 1 < src_.size() && src_[p] == closer && src_[p + 1] == '}' && (modifier != '+' || kind == '%')) {
          pos_ = p + 2;
          tokens_.push_back(Token{kind == '{' ? Token::Type::kVariableEnd : Token::Type::kBlockEnd, "", 0, 0, line_});
          if (kind == '{') {
            if (modifier != '-') return false;
            return after_block_end('-');
          }
          return after_block_end(modifier);
        }
      }
      lex_expression_token(depth);
    }
  }

  void lex_expression_token(int& depth) {
    const char c = src_[pos_];
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back(Token{Token::Type::kName, src_.substr(start, pos_ - start), 0, 0, line_});
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string(c);
      return;
    }
    if (is_digit(c)) {
      lex_number();
      return;
    }
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{Token::Type::kOperator, std::string(op), 0, 0, line_});
        pos_ += 2;
        return;
      }
    }
    static constexpr std::string_view kSingle = "+-/*%~[](){}<>=.:|,;";
    if (kSingle.find(c) == std::string_view::npos) {
      syntax_error(line_, std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) syntax_error(line_, std::string("unexpected '") + c + "'");
      --depth;
    }
    tokens_.push_back(Token{Token::Type::kOperator, std::string(1, c), 0, 0, line_});
    ++pos_;
  }

  void lex_string(char quote) {
    const int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\') ++p;
      ++p;
    }
    if (p >= src_.size()) syntax_error(start_line, "string literal is not closed");
    std::string_view body(src_.data() + pos_ + 1, p - pos_ - 1);
    line_ += count_newlines(body);
    tokens_.push_back(Token{Token::Type::kString, decode_string_literal(body, start_line), 0, 0, start_line});
    pos_ = p + 1;
  }

  // Digits with optional single underscores between them.
  size_t scan_digits(size_t p) const {
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
      ++p;
    }
    return p;
  }

  void lex_number() {
    const size_t start = pos_;
    size_t p = scan_digits(pos_);
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      is_float = true;
      p = scan_digits(p + 1);
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        is_float = true;
        p = scan_digits(q);
      }
    }
    std::string digits;
    for (size_t i = start; i < p; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    Token token{is_float ? Token::Type::kFloat : Token::Type::kInteger, digits, 0, 0, line_};
    if (is_float) {
      token.number = std::strtod(digits.c_str(), nullptr);
    } else {
      const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.integer);
      if (result.ec != std::errc()) syntax_error(line_, "integer literal " + digits + " is out of range");
    }
    tokens_.push_back(std::move(token));
    pos_ = p;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool last_end_consumed_newline_ = false;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace qinfer::jinja
