#include "chat_template/jinja/interpreter.h"

#include <stdexcept>

#include "chat_template/jinja/builtins.h"
#include "util/error.h"

namespace qinfer::jinja {

namespace {

constexpr std::string_view kLoopName = "loop";

void bind_targets(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  if (!value.is_sequence_kind() && !value.is_string()) {
    throw Failure("cannot unpack non-iterable " + value.type_name());
  }
  const ValueList items = iterate(value);
  if (items.size() != targets.size()) {
    throw Failure(std::string(items.size() > targets.size() ? "too many" : "not enough") +
                  " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                  std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

}  // namespace

std::string Interpreter::render(Scope& root) {
  std::string out;
  out_ = &out;
  root_ = &root;
  try {
    execute(program_, root);
  } catch (const Failure& failure) {
    throw Error(ErrorKind::kInvalidArgument,
                "chat template error at line " + std::to_string(line_) + ": " + failure.what());
  } catch (const Error&) {
    throw;
  } catch (const std::length_error& e) {  // a value too large for the standard library
    throw Error(ErrorKind::kInvalidArgument, "chat template error at line " + std::to_string(line_) + ": " + e.what());
  }
  return out;
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) throw Failure("template exceeded the step limit (endless loop?)");
}

void Interpreter::append_output(const Value& value) {
  value.append_output(*out_);
  if (out_->size() > limits_.max_output_bytes) throw Failure("rendered text exceeds the output limit");
}

Interpreter::Flow Interpreter::execute(const Body& body, Scope& scope) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = execute_statement(*stmt, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::execute_statement(const Stmt& stmt, Scope& scope) {
  step();
  line_ = stmt.line;
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      *out_ += stmt.text;
      if (out_->size() > limits_.max_output_bytes) throw Failure("rendered text exceeds the output limit");
      return Flow::kNormal;
    case Stmt::Kind::kOutput:
      append_output(evaluate(*stmt.expr, scope));
      return Flow::kNormal;
    case Stmt::Kind::kIf:
      for (const auto& [condition, body] : stmt.branches) {
        if (evaluate(*condition, scope).truthy()) return execute(body, scope);
      }
      return execute(stmt.else_body, scope);
    case Stmt::Kind::kFor:
      return execute_for(stmt, evaluate(*stmt.expr, scope), scope, 1);
    case Stmt::Kind::kSet:
    case Stmt::Kind::kSetBlock:
      execute_set(stmt, scope);
      return Flow::kNormal;
    case Stmt::Kind::kMacro:
      define_macro(stmt, scope);
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock:
      append_output(execute_call_block(stmt, scope));
      return Flow::kNormal;
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kWith: {
      Scope inner(&scope);
      for (const auto& [name, value] : stmt.parameters) inner.set(name, evaluate(*value, scope));
      return execute(stmt.body, inner);
    }
    case Stmt::Kind::kFilterBlock: {
      Value text = Value::string(capture(stmt.body, scope));
      append_output(apply_filter_chain(*stmt.filter, std::move(text), scope));
      return Flow::kNormal;
    }
    case Stmt::Kind::kGeneration:
      return execute(stmt.body, scope);
  }
  return Flow::kNormal;
}

// One run of a for-loop over `iterable`; a recursive loop runs again, one level deeper, for each loop(...) call.
Interpreter::Flow Interpreter::execute_for(const Stmt& stmt, const Value& iterable, Scope& scope, int depth) {
  ValueList items = iterate(iterable);
  if (stmt.condition) {
    ValueList kept;
    for (Value& item : items) {
      step();
      Scope filter_scope(&scope);
      bind_targets(stmt.targets, item, filter_scope);
      if (evaluate(*stmt.condition, filter_scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return execute(stmt.else_body, scope);

  auto state = std::make_shared<LoopState>();
  state->items = &items;
  state->depth = depth;
  state->recursive_loop = stmt.recursive ? &stmt : nullptr;
  state->scope = &scope;
  const Value loop = Value::loop(state);
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    state->index0 = i;
    Scope iteration(&scope);
    iteration.set(kLoopName, loop);
    line_ = stmt.line;
    bind_targets(stmt.targets, items[i], iteration);
    if (execute(stmt.body, iteration) == Flow::kBreak) break;
  }
  state->items = nullptr;
  return Flow::kNormal;
}

Value Interpreter::call_loop(const LoopState& loop, CallArgs& args) {
  if (loop.items == nullptr) throw Failure("the loop object was used after its loop ended");
  if (loop.recursive_loop == nullptr) {
    throw Failure("The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) throw Failure("loop() takes exactly one argument");
  const Stmt& stmt = *loop.recursive_loop;
  Scope& scope = *loop.scope;
  const int depth = loop.depth + 1;
  const Value iterable = args.positional[0];
  return Value::string(render_nested([&] { execute_for(stmt, iterable, scope, depth); }));
}

void Interpreter::execute_set(const Stmt& stmt, Scope& scope) {
  Value value;
  if (stmt.kind == Stmt::Kind::kSetBlock) {
    value = Value::string(capture(stmt.body, scope));
    if (stmt.filter) value = apply_filter_chain(*stmt.filter, std::move(value), scope);
  } else {
    value = evaluate(*stmt.expr, scope);
  }
  if (stmt.attribute.empty()) {
    bind_targets(stmt.targets, value, scope);
    return;
  }
  const Value* target = scope.lookup(stmt.targets[0]);
  if (target == nullptr || target->kind() != Value::Kind::kNamespace) {
    throw Failure("cannot assign attribute on non-namespace object");
  }
  // jinja2 allows it, but a namespace stored into a namespace could form a cycle or grow without bound.
  if (value.holds_namespace()) throw Failure("storing a namespace inside a namespace is not supported");
  Value::Dict& attributes = target->namespace_attributes();
  for (auto& [key, existing] : attributes) {
    if (key.str() == stmt.attribute) {
      existing = std::move(value);
      return;
    }
  }
  attributes.emplace_back(Value::string(stmt.attribute), std::move(value));
}

void Interpreter::define_macro(const Stmt& stmt, Scope& scope) {
  // Macros see the render's variables, not the scope they were defined in: that scope may be gone when a macro
  // stored in a namespace is called later.
  const Stmt* macro = &stmt;
  scope.set(stmt.name, Value::function(stmt.name, [macro](Interpreter& self, CallArgs& args) {
              Scope local(self.root_);
              self.bind_parameters("macro '" + macro->name + "'", macro->parameters, args, local);
              // A {% call %} block passes its body as `caller`.
              if (const Value* caller = args.get("caller")) local.set("caller", *caller);
              return Value::string(self.render_nested([&] { self.execute(macro->body, local); }));
            }));
}

void Interpreter::bind_parameters(const std::string& callee, const NamedExprs& parameters, const CallArgs& args,
                                  Scope& local) {
  if (args.positional.size() > parameters.size()) {
    throw Failure(callee + " takes not more than " + std::to_string(parameters.size()) + " argument(s)");
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, fallback] = parameters[i];
    if (const Value* given = args.get(name, i)) {
      local.set(name, *given);
    } else if (fallback) {
      local.set(name, evaluate(*fallback, local));
    } else {
      local.set(name, Value::undefined("parameter '" + name + "' was not provided"));
    }
  }
  for (const auto& [name, value] : args.keyword) {
    bool known = name == "caller";
    for (const auto& parameter : parameters) known = known || parameter.first == name;
    if (!known) throw Failure(callee + " takes no keyword argument '" + name + "'");
  }
}

// {% call m(args) %}body{% endcall %} is m(args, caller=<body as a macro>); caller() renders the body in the scope of
// the call statement, so it refuses to run once that statement is over (it could have been stored somewhere).
Value Interpreter::execute_call_block(const Stmt& stmt, Scope& scope) {
  const Value callee = evaluate(*stmt.expr->subject, scope);
  CallArgs args = evaluate_arguments(*stmt.expr, scope);
  auto active = std::make_shared<bool>(true);
  const Stmt* block = &stmt;
  Scope* call_scope = &scope;
  args.keyword.emplace_back(
      "caller", Value::function("caller", [block, call_scope, active](Interpreter& self, CallArgs& caller_args) {
        if (!*active) throw Failure("caller() was called after its call block ended");
        Scope local(call_scope);
        self.bind_parameters("caller", block->parameters, caller_args, local);
        return Value::string(self.render_nested([&] { self.execute(block->body, local); }));
      }));
  line_ = stmt.line;
  Value result = call(callee, args);
  *active = false;
  return result;
}

template <typename Run>
std::string Interpreter::render_nested(Run&& run) {
  if (call_depth_ >= limits_.max_call_depth) throw Failure("macro calls nested too deeply");
  ++call_depth_;
  const int saved_line = line_;
  std::string captured = capture_output(run);
  line_ = saved_line;
  --call_depth_;
  return captured;
}

template <typename Run>
std::string Interpreter::capture_output(Run&& run) {
  std::string captured;
  std::string* saved = out_;
  out_ = &captured;
  try {
    run();
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return captured;
}

std::string Interpreter::capture(const Body& body, Scope& scope) {
  return capture_output([&] { execute(body, scope); });
}

Value Interpreter::apply_filter_chain(const Expr& filter, Value subject, Scope& scope) {
  if (filter.subject) subject = apply_filter_chain(*filter.subject, std::move(subject), scope);
  CallArgs args = evaluate_arguments(filter, scope);
  line_ = filter.line;
  return apply_filter(*this, filter.name, subject, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.kind() == Value::Kind::kLoop) return call_loop(callee.loop_state(), args);
  if (callee.kind() != Value::Kind::kFunction) {
    callee.require_defined();
    throw Failure("'" + callee.type_name() + "' is not callable");
  }
  return callee.function_object().call(*this, args);
}

CallArgs Interpreter::evaluate_arguments(const Expr& expr, Scope& scope) {
  CallArgs args;
  args.positional.reserve(expr.operands.size());
  for (const ExprPtr& operand : expr.operands) args.positional.push_back(evaluate(*operand, scope));
  for (const auto& [name, value] : expr.keywords) args.keyword.emplace_back(name, evaluate(*value, scope));
  return args;
}

Value Interpreter::lookup(const Expr& name, const Scope& scope) const {
  if (const Value* value = scope.lookup(name.name)) return *value;
  if (const Value* global = find_global(name.name)) return *global;
  return Value::undefined("'" + name.name + "' is undefined");
}

Value Interpreter::evaluate(const Expr& expr, Scope& scope) {
  line_ = expr.line;
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName:
      return lookup(expr, scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      items.reserve(expr.operands.size());
      for (const ExprPtr& operand : expr.operands) items.push_back(evaluate(*operand, scope));
      return expr.kind == Expr::Kind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Expr::Kind::kDict: {
      Value::Dict entries;
      for (size_t i = 0; i + 1 < expr.operands.size(); i += 2) {
        Value key = evaluate(*expr.operands[i], scope);
        Value value = evaluate(*expr.operands[i + 1], scope);
        bool replaced = false;
        for (auto& entry : entries) {
          if (values_equal(entry.first, key)) {
            entry.second = value;
            replaced = true;
          }
        }
        if (!replaced) entries.emplace_back(std::move(key), std::move(value));
      }
      return Value::dict(std::move(entries));
    }
    case Expr::Kind::kGetAttr: {
      const Value object = evaluate(*expr.subject, scope);
      line_ = expr.line;
      return get_attribute(object, expr.name);
    }
    case Expr::Kind::kGetItem: {
      const Value object = evaluate(*expr.subject, scope);
      const Value key = evaluate(*expr.operands[0], scope);
      line_ = expr.line;
      return get_item(object, key);
    }
    case Expr::Kind::kSlice: {
      const Value object = evaluate(*expr.subject, scope);
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (expr.operands[i]) bounds[i] = evaluate(*expr.operands[i], scope);
      }
      line_ = expr.line;
      return slice(object, expr.operands[0] ? &bounds[0] : nullptr, expr.operands[1] ? &bounds[1] : nullptr,
                   expr.operands[2] ? &bounds[2] : nullptr);
    }
    case Expr::Kind::kCall:
      return evaluate_call(expr, scope);
    case Expr::Kind::kFilter: {
      const Value subject = evaluate(*expr.subject, scope);
      CallArgs args = evaluate_arguments(expr, scope);
      line_ = expr.line;
      return apply_filter(*this, expr.name, subject, args);
    }
    case Expr::Kind::kTest: {
      const Value subject = evaluate(*expr.subject, scope);
      CallArgs args = evaluate_arguments(expr, scope);
      line_ = expr.line;
      return Value::boolean(apply_test(*this, expr.name, subject, args) != expr.negated);
    }
    case Expr::Kind::kNot:
      return Value::boolean(!evaluate(*expr.operands[0], scope).truthy());
    case Expr::Kind::kNegate:
      return negate(evaluate(*expr.operands[0], scope));
    case Expr::Kind::kPlus: {
      Value operand = evaluate(*expr.operands[0], scope);
      operand.require_defined();
      if (!operand.is_number()) throw Failure("bad operand type for unary +: '" + operand.type_name() + "'");
      return operand.is_bool() ? Value::integer(operand.as_int()) : operand;
    }
    case Expr::Kind::kBinary: {
      if (expr.name == "+") return evaluate_sum(expr, scope);
      const Value left = evaluate(*expr.operands[0], scope);
      const Value right = evaluate(*expr.operands[1], scope);
      line_ = expr.line;
      return binary_operation(expr.name, left, right);
    }
    case Expr::Kind::kAnd: {
      Value left = evaluate(*expr.operands[0], scope);
      return left.truthy() ? evaluate(*expr.operands[1], scope) : left;
    }
    case Expr::Kind::kOr: {
      Value left = evaluate(*expr.operands[0], scope);
      return left.truthy() ? left : evaluate(*expr.operands[1], scope);
    }
    case Expr::Kind::kCompare:
      return evaluate_compare(expr, scope);
    case Expr::Kind::kCondition:
      if (evaluate(*expr.operands[0], scope).truthy()) return evaluate(*expr.operands[1], scope);
      if (expr.operands[2]) return evaluate(*expr.operands[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

Value Interpreter::evaluate_sum(const Expr& expr, Scope& scope) {
  // A left-deep chain a + b + c + ... (how templates build every turn) is folded in one pass, appending string
  // terms to one buffer instead of allocating a new string per +. Terms are evaluated once, left to right, and
  // non-string terms go through binary_operation exactly as pairwise evaluation would.
  std::vector<const Expr*> terms;
  const Expr* node = &expr;
  while (node->kind == Expr::Kind::kBinary && node->name == "+") {
    terms.push_back(node->operands[1].get());
    node = node->operands[0].get();
  }
  terms.push_back(node);
  Value total = evaluate(*terms.back(), scope);
  std::string text;
  bool buffering = false;  // total's value is `text`
  for (auto term = terms.rbegin() + 1; term != terms.rend(); ++term) {
    const Value next = evaluate(**term, scope);
    line_ = expr.line;
    if (next.is_string() && (buffering || total.is_string())) {
      if (!buffering) {
        text = total.str();
        buffering = true;
      }
      text += next.str();
      if (text.size() > limits_.max_output_bytes) throw Failure("concatenated string too long");
      continue;
    }
    if (buffering) {
      total = Value::string(std::move(text));
      buffering = false;
    }
    total = binary_operation("+", total, next);
  }
  return buffering ? Value::string(std::move(text)) : total;
}

Value Interpreter::evaluate_compare(const Expr& expr, Scope& scope) {
  Value left = evaluate(*expr.operands[0], scope);
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = evaluate(*expr.operands[i + 1], scope);
    line_ = expr.line;
    if (!binary_operation(expr.ops[i], left, right).truthy()) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::evaluate_call(const Expr& expr, Scope& scope) {
  // obj.method(...) on str/dict/list runs the method directly instead of building a bound function.
  if (expr.subject->kind == Expr::Kind::kGetAttr) {
    const Value receiver = evaluate(*expr.subject->subject, scope);
    CallArgs args = evaluate_arguments(expr, scope);
    line_ = expr.line;
    if (has_method(receiver, expr.subject->name)) return call_method(receiver, expr.subject->name, args);
    const Value callee = get_attribute(receiver, expr.subject->name);
    return call(callee, args);
  }
  const Value callee = evaluate(*expr.subject, scope);
  CallArgs args = evaluate_arguments(expr, scope);
  line_ = expr.line;
  return call(callee, args);
}

}  // namespace qinfer::jinja
