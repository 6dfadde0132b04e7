// The expression half of the Jinja parser: jinja2's operator precedence (conditions, or/and/not, chained
// comparisons, `~`, arithmetic, unary, filters binding tighter than arithmetic, `is` tests after filters), literals,
// lists, dicts, subscripts, slices and calls.
#pragma once

#include <string>

#include "chat_template/jinja/ast.h"
#include "chat_template/jinja/parser_cursor.h"

namespace qinfer::jinja {

class ExpressionParser : public TokenCursor {
 public:
  using TokenCursor::TokenCursor;

 protected:
  ExprPtr make_expr(Expr::Kind kind, int line);
  bool at_tuple_end() const;
  ExprPtr parse_tuple(bool with_condition, bool explicit_parentheses);
  ExprPtr parse_expression(bool with_condition);
  ExprPtr parse_condition();
  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr literal(Value value, int line);
  ExprPtr parse_primary();
  ExprPtr parse_list(int line);
  ExprPtr parse_dict(int line);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_arguments(Expr& call);
  ExprPtr parse_call(ExprPtr node);
  std::string parse_dotted_name();
  // `| name(args) | name2 ...`; with `require_pipe` false the first filter has no leading pipe (filter blocks).
  ExprPtr parse_filter_chain(ExprPtr subject, bool require_pipe = true);
  ExprPtr parse_filter_expression(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
};

}  // namespace qinfer::jinja
