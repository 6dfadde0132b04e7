// The token cursor of the Jinja parser (parser.cpp's statements, expression_parser.cpp's expressions): position,
// look-ahead, the nesting guard and the syntax errors with their line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat_template/jinja/lexer.h"
#include "util/error.h"

namespace qinfer::jinja {

// Deeper nesting than this is refused so that hostile templates cannot exhaust the stack.
constexpr int kMaxNesting = 200;

class TokenCursor {
 public:
  explicit TokenCursor(const std::vector<Token>& tokens) : tokens_(tokens) {}

 protected:
  using Type = Token::Type;

  // RAII guard of the nesting depth.
  struct Nest {
    explicit Nest(TokenCursor& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.fail("template is nested too deeply");
    }
    ~Nest() { --parser.depth_; }
    TokenCursor& parser;
  };

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[pos_ + ahead < tokens_.size() ? pos_ + ahead : tokens_.size() - 1];
  }
  const Token& advance() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(current().line, message); }
  [[noreturn]] static void fail_at(int line, const std::string& message) {
    throw Error(ErrorKind::kFormat, "template syntax error at line " + std::to_string(line) + ": " + message);
  }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case Type::kText:
        return "template text";
      case Type::kVariableBegin:
        return "'{{'";
      case Type::kVariableEnd:
        return "'}}'";
      case Type::kBlockBegin:
        return "'{%'";
      case Type::kBlockEnd:
        return "'%}'";
      case Type::kName:
      case Type::kOperator:
      case Type::kInteger:
      case Type::kFloat:
        return "'" + token.text + "'";
      case Type::kString:
        return "string literal";
      case Type::kEnd:
        return "end of template";
    }
    return "token";
  }

  bool at_operator(std::string_view op) const { return current().type == Type::kOperator && current().text == op; }
  bool at_name(std::string_view name) const { return current().type == Type::kName && current().text == name; }
  bool skip_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    advance();
    return true;
  }
  void expect_operator(std::string_view op) {
    if (!skip_operator(op)) fail("expected '" + std::string(op) + "', got " + describe(current()));
  }
  void expect_name(std::string_view name) {
    if (!skip_name(name)) fail("expected '" + std::string(name) + "', got " + describe(current()));
  }
  std::string expect_identifier() {
    if (current().type != Type::kName) fail("expected a name, got " + describe(current()));
    return advance().text;
  }
  void expect_block_end() {
    if (current().type != Type::kBlockEnd) fail("expected end of statement '%}', got " + describe(current()));
    advance();
  }

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace qinfer::jinja
