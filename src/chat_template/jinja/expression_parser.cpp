#include "chat_template/jinja/expression_parser.h"

#include <utility>

#include "chat_template/jinja/builtins.h"

namespace qinfer::jinja {

ExprPtr ExpressionParser::make_expr(Expr::Kind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

bool ExpressionParser::at_tuple_end() const {
  const Token& t = current();
  return t.type == Type::kVariableEnd || t.type == Type::kBlockEnd || t.type == Type::kEnd ||
         (t.type == Type::kOperator && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == "=")) ||
         (t.type == Type::kName && (t.text == "if" || t.text == "recursive"));
}

ExprPtr ExpressionParser::parse_tuple(bool with_condition, bool explicit_parentheses) {
  const int line = current().line;
  std::vector<ExprPtr> items;
  bool saw_comma = false;
  while (true) {
    if (!items.empty()) {
      if (!skip_operator(",")) break;
      saw_comma = true;
      if (at_tuple_end()) break;
    }
    if (explicit_parentheses && items.empty() && at_operator(")")) break;
    items.push_back(parse_expression(with_condition));
  }
  if (!saw_comma && items.size() == 1) return std::move(items[0]);
  if (items.empty() && !explicit_parentheses) fail("expected an expression, got " + describe(current()));
  auto tuple = make_expr(Expr::Kind::kTuple, line);
  tuple->operands = std::move(items);
  return tuple;
}

ExprPtr ExpressionParser::parse_expression(bool with_condition) {
  Nest nest(*this);
  return with_condition ? parse_condition() : parse_or();
}

ExprPtr ExpressionParser::parse_condition() {
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    auto condition = make_expr(Expr::Kind::kCondition, current().line);
    advance();
    condition->operands.push_back(parse_or());
    condition->operands.push_back(std::move(expr));
    condition->operands.push_back(skip_name("else") ? parse_condition() : nullptr);
    expr = std::move(condition);
  }
  return expr;
}

ExprPtr ExpressionParser::binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
  auto expr = make_expr(kind, line);
  expr->name = std::move(op);
  expr->operands.push_back(std::move(left));
  expr->operands.push_back(std::move(right));
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    const int line = advance().line;
    left = binary(Expr::Kind::kOr, "or", std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    const int line = advance().line;
    left = binary(Expr::Kind::kAnd, "and", std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    Nest nest(*this);
    auto expr = make_expr(Expr::Kind::kNot, advance().line);
    expr->operands.push_back(parse_not());
    return expr;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const int line = current().line;
  ExprPtr first = parse_math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    const Token& t = current();
    if (t.type == Type::kOperator &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
      ops.push_back(advance().text);
    } else if (at_name("in")) {
      advance();
      ops.push_back("in");
    } else if (at_name("not") && peek().type == Type::kName && peek().text == "in") {
      advance();
      advance();
      ops.push_back("not in");
    } else {
      break;
    }
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  auto compare = make_expr(Expr::Kind::kCompare, line);
  compare->operands.push_back(std::move(first));
  for (auto& operand : operands) compare->operands.push_back(std::move(operand));
  compare->ops = std::move(ops);
  return compare;
}

ExprPtr ExpressionParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_operator("+") || at_operator("-")) {
    const Token& op = advance();
    left = binary(Expr::Kind::kBinary, op.text, std::move(left), parse_concat(), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr left = parse_math2();
  while (at_operator("~")) {
    const Token& op = advance();
    left = binary(Expr::Kind::kBinary, "~", std::move(left), parse_math2(), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
    const Token& op = advance();
    left = binary(Expr::Kind::kBinary, op.text, std::move(left), parse_pow(), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_operator("**")) {
    const Token& op = advance();
    left = binary(Expr::Kind::kBinary, "**", std::move(left), parse_unary(true), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  Nest nest(*this);
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    const Token& op = advance();
    node = make_expr(op.text == "-" ? Expr::Kind::kNegate : Expr::Kind::kPlus, op.line);
    node->operands.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expression(std::move(node));
  return node;
}

ExprPtr ExpressionParser::literal(Value value, int line) {
  auto expr = make_expr(Expr::Kind::kLiteral, line);
  expr->literal = std::move(value);
  return expr;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& token = current();
  const int line = token.line;
  switch (token.type) {
    case Type::kName: {
      advance();
      if (token.text == "true" || token.text == "True") return literal(Value::boolean(true), line);
      if (token.text == "false" || token.text == "False") return literal(Value::boolean(false), line);
      if (token.text == "none" || token.text == "None") return literal(Value::none(), line);
      auto name = make_expr(Expr::Kind::kName, line);
      name->name = token.text;
      return name;
    }
    case Type::kString: {
      std::string text;
      while (current().type == Type::kString) text += advance().text;
      return literal(Value::string(std::move(text)), line);
    }
    case Type::kInteger:
      advance();
      return literal(Value::integer(token.integer), line);
    case Type::kFloat:
      advance();
      return literal(Value::floating(token.number), line);
    case Type::kOperator:
      if (token.text == "(") {
        advance();
        ExprPtr inner = parse_tuple(true, true);
        expect_operator(")");
        return inner;
      }
      if (token.text == "[") return parse_list(line);
      if (token.text == "{") return parse_dict(line);
      break;
    default:
      break;
  }
  fail("unexpected " + describe(token));
}

ExprPtr ExpressionParser::parse_list(int line) {
  advance();
  auto list = make_expr(Expr::Kind::kList, line);
  while (!skip_operator("]")) {
    if (!list->operands.empty()) {
      expect_operator(",");
      if (skip_operator("]")) break;
    }
    list->operands.push_back(parse_expression(true));
  }
  return list;
}

ExprPtr ExpressionParser::parse_dict(int line) {
  advance();
  auto dict = make_expr(Expr::Kind::kDict, line);
  while (!skip_operator("}")) {
    if (!dict->operands.empty()) {
      expect_operator(",");
      if (skip_operator("}")) break;
    }
    dict->operands.push_back(parse_expression(true));
    expect_operator(":");
    dict->operands.push_back(parse_expression(true));
  }
  return dict;
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".")) {
      const int line = advance().line;
      const Token& attribute = current();
      if (attribute.type == Type::kName) {
        auto get = make_expr(Expr::Kind::kGetAttr, line);
        get->name = advance().text;
        get->subject = std::move(node);
        node = std::move(get);
      } else if (attribute.type == Type::kInteger) {
        auto get = make_expr(Expr::Kind::kGetItem, line);
        get->operands.push_back(literal(Value::integer(advance().integer), line));
        get->subject = std::move(node);
        node = std::move(get);
      } else {
        fail("expected an attribute name after '.', got " + describe(attribute));
      }
    } else if (at_operator("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  const int line = advance().line;
  std::vector<ExprPtr> bounds(3);
  bool is_slice = false;
  if (!at_operator(":")) bounds[0] = parse_expression(true);
  if (skip_operator(":")) {
    is_slice = true;
    if (!at_operator("]") && !at_operator(":")) bounds[1] = parse_expression(true);
    if (skip_operator(":") && !at_operator("]")) bounds[2] = parse_expression(true);
  }
  if (!is_slice && at_operator(",")) fail("tuple subscripts are not supported");
  expect_operator("]");
  auto get = make_expr(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, line);
  get->subject = std::move(node);
  if (is_slice) {
    get->operands = std::move(bounds);
  } else {
    get->operands.push_back(std::move(bounds[0]));
  }
  return get;
}

void ExpressionParser::parse_call_arguments(Expr& call) {
  expect_operator("(");
  bool first = true;
  while (!skip_operator(")")) {
    if (!first) {
      expect_operator(",");
      if (skip_operator(")")) break;
    }
    first = false;
    if (at_operator("*") || at_operator("**")) fail("*args and **kwargs in calls are not supported");
    if (current().type == Type::kName && peek().type == Type::kOperator && peek().text == "=") {
      std::string keyword = advance().text;
      advance();
      call.keywords.emplace_back(std::move(keyword), parse_expression(true));
    } else {
      if (!call.keywords.empty()) fail("positional argument follows keyword argument");
      call.operands.push_back(parse_expression(true));
    }
  }
}

ExprPtr ExpressionParser::parse_call(ExprPtr node) {
  auto call = make_expr(Expr::Kind::kCall, current().line);
  call->subject = std::move(node);
  parse_call_arguments(*call);
  return call;
}

std::string ExpressionParser::parse_dotted_name() {
  std::string name = expect_identifier();
  while (at_operator(".") && peek().type == Type::kName) {
    advance();
    name += "." + advance().text;
  }
  return name;
}

// `| name(args) | name2 ...`; with `require_pipe` false the first filter has no leading pipe (filter blocks).
ExprPtr ExpressionParser::parse_filter_chain(ExprPtr subject, bool require_pipe) {
  bool first = true;
  while ((first && !require_pipe) || at_operator("|")) {
    if (!(first && !require_pipe)) advance();
    first = false;
    auto filter = make_expr(Expr::Kind::kFilter, current().line);
    filter->name = parse_dotted_name();
    if (!is_filter_name(filter->name)) fail_at(filter->line, "no filter named '" + filter->name + "'");
    if (at_operator("(")) parse_call_arguments(*filter);
    filter->subject = std::move(subject);
    subject = std::move(filter);
  }
  return subject;
}

ExprPtr ExpressionParser::parse_filter_expression(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      node = parse_filter_chain(std::move(node));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
  auto test = make_expr(Expr::Kind::kTest, advance().line);
  test->negated = skip_name("not");
  test->name = parse_dotted_name();
  if (!is_test_name(test->name)) fail_at(test->line, "no test named '" + test->name + "'");
  const Token& t = current();
  if (at_operator("(")) {
    parse_call_arguments(*test);
  } else if ((t.type == Type::kName || t.type == Type::kString || t.type == Type::kInteger || t.type == Type::kFloat ||
              at_operator("[") || at_operator("{")) &&
             !(t.type == Type::kName &&
               (t.text == "else" || t.text == "or" || t.text == "and" || t.text == "is" || t.text == "if"))) {
    test->operands.push_back(parse_postfix(parse_primary()));
  }
  test->subject = std::move(node);
  return test;
}

}  // namespace qinfer::jinja
