// Regular expressions (the ECMAScript subset JSON Schema `pattern` and vLLM's guided_regex use) as grammar
// expressions: literals, escapes (\d \w \s and their negations, \n \t \r \f \v \0 \xHH \uHHHH \u{...}, escaped
// punctuation), classes with ranges and negation, `.` (any character but line terminators), groups ((...), (?:...),
// named), alternation, and * + ? {m} {m,} {m,n} (lazy forms match the same strings). A regex always matches the whole
// text: ^ at the start and $ at the end are accepted and change nothing. Lookaround, backreferences, \b, \p{...} and
// possessive quantifiers are refused with their position.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace qinfer::grammar {

struct RegexOptions {
  // Match inside a JSON string literal: the text is the JSON-escaped form of what the regex matches (a `"` in the
  // value is written \", control characters as escapes).
  bool json_string = false;
};

// An expression of `grammar` matching the pattern. Throws Error(kInvalidArgument) "regex error at position N: ...".
int32_t regex_expression(Grammar& grammar, std::string_view pattern, const RegexOptions& options = {});

// A grammar whose root matches the pattern.
Grammar parse_regex(std::string_view pattern);

}  // namespace qinfer::grammar
