#include "chat_template/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "chat_template/jinja/builtins.h"
#include "util/error.h"

namespace qinfer::jinja {

namespace {

// Deeper nesting than this is refused so that hostile templates cannot exhaust the stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body parse_all() {
    Body body = parse_body({});
    return body;
  }

 private:
  using Type = Token::Type;

  // RAII guard of the nesting depth.
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.fail("template is nested too deeply");
    }
    ~Nest() { --parser.depth_; }
    Parser& parser;
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

  // ---- statements ----

  // Parses statements until a block tag named in `stops` (left unconsumed, positioned at its name) or the end.
  Body parse_body(std::initializer_list<std::string_view> stops) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& token = current();
      if (token.type == Type::kEnd) {
        if (stops.size() > 0) fail("unexpected end of template, expected '" + std::string(*stops.begin()) + "'");
        return body;
      }
      if (token.type == Type::kText) {
        auto stmt = make_stmt(Stmt::Kind::kText, token.line);
        stmt->text = token.text;
        body.push_back(std::move(stmt));
        advance();
        continue;
      }
      if (token.type == Type::kVariableBegin) {
        auto stmt = make_stmt(Stmt::Kind::kOutput, token.line);
        advance();
        stmt->expr = parse_tuple(true, false);
        if (current().type != Type::kVariableEnd)
          fail("expected end of print statement '}}', got " + describe(current()));
        advance();
        body.push_back(std::move(stmt));
        continue;
      }
      if (token.type != Type::kBlockBegin) fail("unexpected " + describe(token));
      const Token& name = peek();
      if (name.type != Type::kName) fail_at(name.line, "expected a statement name, got " + describe(name));
      for (std::string_view stop : stops) {
        if (name.text == stop) {
          advance();  // to the name
          return body;
        }
      }
      advance();
      body.push_back(parse_statement());
    }
  }

  static StmtPtr make_stmt(Stmt::Kind kind, int line) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = line;
    return stmt;
  }

  StmtPtr parse_statement() {
    const Token& name = current();
    const int line = name.line;
    const std::string keyword = name.text;
    advance();
    if (keyword == "if") return parse_if(line);
    if (keyword == "for") return parse_for(line);
    if (keyword == "set") return parse_set(line);
    if (keyword == "macro") return parse_macro(line);
    if (keyword == "call") return parse_call_block(line);
    if (keyword == "with") return parse_with(line);
    if (keyword == "filter") return parse_filter_block(line);
    if (keyword == "generation") {
      auto stmt = make_stmt(Stmt::Kind::kGeneration, line);
      expect_block_end();
      stmt->body = parse_body({"endgeneration"});
      close_block();
      return stmt;
    }
    if (keyword == "break" || keyword == "continue") {
      expect_block_end();
      return make_stmt(keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    }
    static constexpr std::string_view kUnsupported[] = {"extends", "include", "import", "from",
                                                        "block",   "do",      "trans",  "autoescape"};
    for (std::string_view unsupported : kUnsupported) {
      if (keyword == unsupported) fail_at(line, "the '" + keyword + "' statement is not supported in chat templates");
    }
    fail_at(line, "unknown statement '" + keyword + "'");
  }

  // Consumes `endX %}` after parse_body stopped at it.
  void close_block() {
    advance();
    expect_block_end();
  }

  StmtPtr parse_if(int line) {
    auto stmt = make_stmt(Stmt::Kind::kIf, line);
    while (true) {
      ExprPtr condition = parse_tuple(false, false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"});
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      const std::string ending = current().text;
      advance();
      if (ending == "elif") continue;
      if (ending == "else") {
        expect_block_end();
        stmt->else_body = parse_body({"endif"});
        close_block();
      } else {
        expect_block_end();
      }
      return stmt;
    }
  }

  StmtPtr parse_for(int line) {
    auto stmt = make_stmt(Stmt::Kind::kFor, line);
    stmt->targets.push_back(expect_identifier());
    while (skip_operator(",")) {
      if (at_name("in")) break;
      stmt->targets.push_back(expect_identifier());
    }
    expect_name("in");
    stmt->expr = parse_tuple(false, false);
    if (skip_name("if")) stmt->condition = parse_expression(true);
    stmt->recursive = skip_name("recursive");
    expect_block_end();
    stmt->body = parse_body({"endfor", "else"});
    if (current().text == "else") {
      advance();
      expect_block_end();
      stmt->else_body = parse_body({"endfor"});
    }
    close_block();
    return stmt;
  }

  StmtPtr parse_set(int line) {
    auto stmt = make_stmt(Stmt::Kind::kSet, line);
    stmt->targets.push_back(expect_identifier());
    if (skip_operator(".")) {
      stmt->attribute = expect_identifier();
    } else {
      while (skip_operator(",")) {
        if (at_operator("=")) break;
        stmt->targets.push_back(expect_identifier());
      }
    }
    if (skip_operator("=")) {
      stmt->expr = parse_tuple(true, false);
      expect_block_end();
      return stmt;
    }
    if (!stmt->attribute.empty() || stmt->targets.size() != 1) fail("expected '=' in set statement");
    stmt->kind = Stmt::Kind::kSetBlock;
    if (at_operator("|")) stmt->filter = parse_filter_chain(nullptr);
    expect_block_end();
    stmt->body = parse_body({"endset"});
    close_block();
    return stmt;
  }

  StmtPtr parse_macro(int line) {
    auto stmt = make_stmt(Stmt::Kind::kMacro, line);
    stmt->name = expect_identifier();
    expect_operator("(");
    parse_parameters(*stmt);
    expect_block_end();
    stmt->body = parse_body({"endmacro"});
    close_block();
    return stmt;
  }

  // `(a, b=default)` after its opening parenthesis.
  void parse_parameters(Stmt& stmt) {
    while (!skip_operator(")")) {
      if (!stmt.parameters.empty()) expect_operator(",");
      if (skip_operator(")")) break;
      std::string parameter = expect_identifier();
      ExprPtr fallback;
      if (skip_operator("=")) fallback = parse_expression(true);
      stmt.parameters.emplace_back(std::move(parameter), std::move(fallback));
    }
  }

  StmtPtr parse_call_block(int line) {
    auto stmt = make_stmt(Stmt::Kind::kCallBlock, line);
    if (skip_operator("(")) parse_parameters(*stmt);
    stmt->expr = parse_expression(true);
    if (stmt->expr->kind != Expr::Kind::kCall) fail_at(line, "expected a call after 'call'");
    expect_block_end();
    stmt->body = parse_body({"endcall"});
    close_block();
    return stmt;
  }

  StmtPtr parse_with(int line) {
    auto stmt = make_stmt(Stmt::Kind::kWith, line);
    while (current().type != Type::kBlockEnd) {
      if (!stmt->parameters.empty()) expect_operator(",");
      std::string target = expect_identifier();
      expect_operator("=");
      stmt->parameters.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    stmt->body = parse_body({"endwith"});
    close_block();
    return stmt;
  }

  StmtPtr parse_filter_block(int line) {
    auto stmt = make_stmt(Stmt::Kind::kFilterBlock, line);
    stmt->filter = parse_filter_chain(nullptr, false);
    expect_block_end();
    stmt->body = parse_body({"endfilter"});
    close_block();
    return stmt;
  }

  // ---- expressions ----

  ExprPtr make_expr(Expr::Kind kind, int line) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    return expr;
  }

  bool at_tuple_end() const {
    const Token& t = current();
    return t.type == Type::kVariableEnd || t.type == Type::kBlockEnd || t.type == Type::kEnd ||
           (t.type == Type::kOperator && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == "=")) ||
           (t.type == Type::kName && (t.text == "if" || t.text == "recursive"));
  }

  ExprPtr parse_tuple(bool with_condition, bool explicit_parentheses) {
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

  ExprPtr parse_expression(bool with_condition) {
    Nest nest(*this);
    return with_condition ? parse_condition() : parse_or();
  }

  ExprPtr parse_condition() {
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

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
    auto expr = make_expr(kind, line);
    expr->name = std::move(op);
    expr->operands.push_back(std::move(left));
    expr->operands.push_back(std::move(right));
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const int line = advance().line;
      left = binary(Expr::Kind::kOr, "or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const int line = advance().line;
      left = binary(Expr::Kind::kAnd, "and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nest nest(*this);
      auto expr = make_expr(Expr::Kind::kNot, advance().line);
      expr->operands.push_back(parse_not());
      return expr;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& op = advance();
      left = binary(Expr::Kind::kBinary, op.text, std::move(left), parse_concat(), op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_operator("~")) {
      const Token& op = advance();
      left = binary(Expr::Kind::kBinary, "~", std::move(left), parse_math2(), op.line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& op = advance();
      left = binary(Expr::Kind::kBinary, op.text, std::move(left), parse_pow(), op.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_operator("**")) {
      const Token& op = advance();
      left = binary(Expr::Kind::kBinary, "**", std::move(left), parse_unary(true), op.line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr literal(Value value, int line) {
    auto expr = make_expr(Expr::Kind::kLiteral, line);
    expr->literal = std::move(value);
    return expr;
  }

  ExprPtr parse_primary() {
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

  ExprPtr parse_list(int line) {
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

  ExprPtr parse_dict(int line) {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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

  void parse_call_arguments(Expr& call) {
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

  ExprPtr parse_call(ExprPtr node) {
    auto call = make_expr(Expr::Kind::kCall, current().line);
    call->subject = std::move(node);
    parse_call_arguments(*call);
    return call;
  }

  std::string parse_dotted_name() {
    std::string name = expect_identifier();
    while (at_operator(".") && peek().type == Type::kName) {
      advance();
      name += "." + advance().text;
    }
    return name;
  }

  // `| name(args) | name2 ...`; with `require_pipe` false the first filter has no leading pipe (filter blocks).
  ExprPtr parse_filter_chain(ExprPtr subject, bool require_pipe = true) {
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

  ExprPtr parse_filter_expression(ExprPtr node) {
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

  ExprPtr parse_test(ExprPtr node) {
    auto test = make_expr(Expr::Kind::kTest, advance().line);
    test->negated = skip_name("not");
    test->name = parse_dotted_name();
    if (!is_test_name(test->name)) fail_at(test->line, "no test named '" + test->name + "'");
    const Token& t = current();
    if (at_operator("(")) {
      parse_call_arguments(*test);
    } else if ((t.type == Type::kName || t.type == Type::kString || t.type == Type::kInteger ||
                t.type == Type::kFloat || at_operator("[") || at_operator("{")) &&
               !(t.type == Type::kName &&
                 (t.text == "else" || t.text == "or" || t.text == "and" || t.text == "is" || t.text == "if"))) {
      test->operands.push_back(parse_postfix(parse_primary()));
    }
    test->subject = std::move(node);
    return test;
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace qinfer::jinja
