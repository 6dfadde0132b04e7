// Executes a parsed template: statements write to an output string, expressions evaluate to Values with jinja2's
// semantics under transformers' sandboxed environment.
#pragma once

#include <cstdint>
#include <string>

#include "chat_template/jinja/ast.h"
#include "chat_template/jinja/scope.h"

namespace qinfer::jinja {

// Bounds that keep a hostile template from hanging or exhausting memory; jinja2 has none of these but would fail
// on recursion depth or memory long before.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;
  int64_t max_steps = 5'000'000;  // statements executed plus loop iterations (a chat turn takes ~50)
  int max_call_depth = 64;        // nested macro calls
};

class Interpreter {
 public:
  Interpreter(const Body& program, const RenderLimits& limits) : program_(program), limits_(limits) {}

  // Renders the program with `root` as the outermost scope. Throws Error(kInvalidArgument)
  // "chat template error at line N: ..." on any template failure.
  std::string render(Scope& root);

  // Calls a function value (global, macro or bound method) with evaluated arguments.
  Value call(const Value& callee, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow execute(const Body& body, Scope& scope);
  Flow execute_statement(const Stmt& stmt, Scope& scope);
  Flow execute_for(const Stmt& stmt, const Value& iterable, Scope& scope, int depth);
  Value call_loop(const LoopState& loop, CallArgs& args);
  void execute_set(const Stmt& stmt, Scope& scope);
  void define_macro(const Stmt& stmt, Scope& scope);
  Value execute_call_block(const Stmt& stmt, Scope& scope);
  // Binds a macro's or caller's parameters in `local` from `args` (defaults evaluated in `local`).
  void bind_parameters(const std::string& callee, const NamedExprs& parameters, const CallArgs& args, Scope& local);
  std::string capture(const Body& body, Scope& scope);
  // What `run()` writes, as a string; counts as one nested call against max_call_depth.
  template <typename Run>
  std::string render_nested(Run&& run);
  template <typename Run>
  std::string capture_output(Run&& run);
  Value apply_filter_chain(const Expr& filter, Value subject, Scope& scope);

  Value evaluate(const Expr& expr, Scope& scope);
  Value evaluate_call(const Expr& expr, Scope& scope);
  Value evaluate_compare(const Expr& expr, Scope& scope);
  Value evaluate_sum(const Expr& expr, Scope& scope);
  CallArgs evaluate_arguments(const Expr& expr, Scope& scope);
  Value lookup(const Expr& name, const Scope& scope) const;

  void step();
  void append_output(const Value& value);

  const Body& program_;
  RenderLimits limits_;
  std::string* out_ = nullptr;
  const Scope* root_ = nullptr;
  int line_ = 0;  // line of the statement or expression being evaluated, for error messages
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace qinfer::jinja
