// Pieces of JSON text as grammar expressions, shared by the regex front end (patterns inside JSON strings) and the
// JSON Schema converter.
#pragma once

#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace qinfer::grammar {

// One character of a JSON string's content whose decoded value is one of `ranges` (normalized): written raw, except
// `"`, `\` and control characters, which are written as their escapes (\" \\ \n \t \r \b \f \u00XX).
int32_t json_string_chars(Grammar& g, const std::vector<CodepointRange>& ranges);

// Any one character of a JSON string's content: a raw character other than `"`, `\` and controls, or an escape
// (\" \\ \/ \b \f \n \r \t \uXXXX).
int32_t json_any_string_char(Grammar& g);

// The JSON string literal of `text` ("..." with the escapes JSON requires).
std::string json_quote(const std::string& text);

}  // namespace qinfer::grammar
