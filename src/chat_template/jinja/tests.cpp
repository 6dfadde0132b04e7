// jinja2's built-in tests (`x is defined`, `x is string`, ...).
#include <algorithm>
#include <string>

#include "chat_template/jinja/builtins.h"
#include "chat_template/jinja/utf8_text.h"

namespace qinfer::jinja {

namespace {

const Value& operand(std::string_view test, const CallArgs& args) {
  if (args.positional.empty()) throw Failure("test '" + std::string(test) + "' needs an argument");
  return args.positional[0];
}

}  // namespace

bool is_test_name(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number", "string", "mapping",
      "iterable", "sequence", "callable", "sameas", "escaped", "odd", "even", "divisibleby", "lower", "upper", "in",
      "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=",
      // known to jinja2, refused when rendered
      "filter", "test"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

bool apply_test(Interpreter&, std::string_view name, const Value& subject, const CallArgs& args) {
  using Kind = Value::Kind;
  if (name == "defined") return !subject.is_undefined();
  if (name == "undefined") return subject.is_undefined();
  if (name == "none") return subject.is_none();
  if (name == "boolean") return subject.is_bool();
  if (name == "true") return subject.is_bool() && subject.as_bool();
  if (name == "false") return subject.is_bool() && !subject.as_bool();
  if (name == "integer") return subject.is_int();
  if (name == "float") return subject.is_float();
  if (name == "number") return subject.is_number();
  if (name == "string") return subject.is_string();
  if (name == "mapping") return subject.is_dict();
  // Undefined is iterable and a sequence (it has __iter__, __len__ and __getitem__), as in jinja2.
  if (name == "iterable") {
    return subject.is_string() || subject.is_sequence_kind() || subject.is_dict() || subject.is_undefined() ||
           subject.kind() == Kind::kGenerator;
  }
  if (name == "sequence") {
    return subject.is_string() || subject.is_sequence_kind() || subject.is_dict() || subject.is_undefined();
  }
  if (name == "callable") return subject.kind() == Kind::kFunction;
  if (name == "sameas") {
    const Value& other = operand(name, args);
    if (subject.kind() != other.kind()) return false;
    if (subject.is_none() || subject.is_bool()) return values_equal(subject, other);
    return subject.kind() == Kind::kDict || subject.kind() == Kind::kList || subject.kind() == Kind::kNamespace
               ? &subject.entries() == &other.entries()
               : values_equal(subject, other);
  }
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {  // value % 2 == 1 / == 0, so 2.5 is neither
    const Value remainder = binary_operation("%", subject, Value::integer(2));
    return values_equal(remainder, Value::integer(name == "odd" ? 1 : 0));
  }
  if (name == "divisibleby") {
    const Value& divisor = operand(name, args);
    if (!subject.is_number() || !divisor.is_number() || divisor.as_double() == 0) {
      throw Failure("divisibleby needs a non-zero number");
    }
    return binary_operation("%", subject, divisor).as_double() == 0;
  }
  // str(value).islower() / isupper(): at least one cased character, and none of the other case.
  if (name == "lower" || name == "upper") {
    return call_method(Value::string(subject.to_output()), name == "lower" ? "islower" : "isupper", CallArgs{})
        .truthy();
  }
  if (name == "in") return contains(operand(name, args), subject);
  if (name == "eq" || name == "equalto" || name == "==")
    return binary_operation("==", subject, operand(name, args)).truthy();
  if (name == "ne" || name == "!=") return binary_operation("!=", subject, operand(name, args)).truthy();
  if (name == "lt" || name == "lessthan" || name == "<")
    return binary_operation("<", subject, operand(name, args)).truthy();
  if (name == "le" || name == "<=") return binary_operation("<=", subject, operand(name, args)).truthy();
  if (name == "gt" || name == "greaterthan" || name == ">")
    return binary_operation(">", subject, operand(name, args)).truthy();
  if (name == "ge" || name == ">=") return binary_operation(">=", subject, operand(name, args)).truthy();
  throw Failure("the '" + std::string(name) + "' test is not supported");
}

}  // namespace qinfer::jinja
