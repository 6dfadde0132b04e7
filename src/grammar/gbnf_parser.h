// llama.cpp's GBNF dialect: `name ::= alternatives` rules (root is `root`), "literals" and [classes] with escapes
// (\n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH), `.` (any character), ( groups ), postfix * + ? {m} {m,} {m,n},
// and # comments. A rule's body ends at a newline outside parentheses; a line may continue after `|`.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace qinfer::grammar {

// Throws Error(kInvalidArgument) "grammar error at line L, column C: ..." for syntax errors and undefined rules.
Grammar parse_gbnf(std::string_view text);

}  // namespace qinfer::grammar
