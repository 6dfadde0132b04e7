// Splits Jinja template source into tokens the way jinja2's lexer does under transformers' settings:
// trim_blocks (drop the first newline after a block or comment tag), lstrip_blocks (drop the spaces and tabs that
// precede a block or comment tag on its line), keep_trailing_newline=False, `-`/`+` whitespace control, comments,
// {% raw %}, newline normalisation to "\n", and Python string-literal escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer::jinja {

struct Token {
  enum class Type {
    kText,           // template data outside tags
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,
    kString,    // text holds the decoded value
    kInteger,   // integer holds the value
    kFloat,     // number holds the value
    kOperator,  // text holds the operator, e.g. "==", "(", "|"
    kEnd,
  };
  Type type = Type::kEnd;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// Throws Error(kFormat) "template line N: ..." on malformed tags or literals.
std::vector<Token> tokenize(std::string_view source);

}  // namespace qinfer::jinja
