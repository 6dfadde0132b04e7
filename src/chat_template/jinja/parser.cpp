#include "chat_template/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "chat_template/jinja/builtins.h"
#include "chat_template/jinja/expression_parser.h"

namespace qinfer::jinja {

namespace {

// The statement half of the parser: tags, bodies and blocks, over the expressions of ExpressionParser.
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parse_all() { return parse_body({}); }

 private:
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
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace qinfer::jinja
