// The parsed form of a Jinja template: expression and statement trees, each node carrying its template line.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/jinja/value.h"

namespace qinfer::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
using NamedExprs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // operands = elements
    kTuple,      // operands = elements
    kDict,       // operands = key0, value0, key1, value1, ...
    kGetAttr,    // subject.name
    kGetItem,    // subject[operands[0]]
    kSlice,      // subject[operands[0]:operands[1]:operands[2]], each may be null
    kCall,       // subject(operands..., keywords...)
    kFilter,     // subject | name(operands..., keywords...); subject null inside filter blocks
    kTest,       // subject is [not] name(operands...); negated
    kNot,        // not operands[0]
    kNegate,     // -operands[0]
    kPlus,       // +operands[0]
    kBinary,     // operands[0] name operands[1]: + - * / // % ** ~
    kAnd,        // operands[0] and operands[1]
    kOr,         // operands[0] or operands[1]
    kCompare,    // operands[0] ops[0] operands[1] ops[1] operands[2] ... (chained, like Python)
    kCondition,  // operands[1] if operands[0] else operands[2] (operands[2] may be null)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  ExprPtr subject;
  std::vector<ExprPtr> operands;
  NamedExprs keywords;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // branches (condition, body) ..., else_body
    kFor,        // for targets in expr [if condition] [recursive]: body [else else_body]
    kSet,        // set targets = expr, or set targets[0].attribute = expr
    kSetBlock,   // set targets[0] [| filter] %} body {% endset
    kMacro,      // macro name(parameters) body
    kCallBlock,  // call[(parameters)] expr (a kCall) %} body {% endcall: body is the callee's caller(parameters)
    kBreak,
    kContinue,
    kWith,         // with parameters (assignments): body
    kFilterBlock,  // filter filter %} body {% endfilter
    kGeneration,   // transformers' {% generation %} body {% endgeneration %}
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  ExprPtr filter;  // a kFilter chain whose innermost subject is null
  std::vector<std::string> targets;
  std::string attribute;  // kSet on a namespace attribute
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  NamedExprs parameters;   // macro/caller parameters (default may be null) or with-assignments
  bool recursive = false;  // kFor: loop(items) renders the loop again one level deeper
};

}  // namespace qinfer::jinja
