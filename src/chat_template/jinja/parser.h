// Recursive-descent parser from lexer tokens to the statement tree, following jinja2's grammar and operator
// precedence (filters bind tighter than arithmetic, `is` tests follow filters, chained comparisons).
#pragma once

#include <vector>

#include "chat_template/jinja/ast.h"
#include "chat_template/jinja/lexer.h"

namespace qinfer::jinja {

// Throws Error(kFormat) "template syntax error at line N: ..." for grammar errors, unknown or unclosed tags and
// unsupported statements (extends, include, import, recursive loops).
Body parse_template(const std::vector<Token>& tokens);

}  // namespace qinfer::jinja
