// Python operators and jinja2's sandboxed attribute/item access.
#include <cmath>
#include <string>

#include "chat_template/jinja/builtins.h"
#include "chat_template/jinja/utf8_text.h"

namespace qinfer::jinja {

namespace {

// Strings and lists built by + and * stay below this, so a template cannot exhaust memory by doubling a string.
constexpr size_t kMaxRepeatedBytes = size_t{64} << 20;

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  throw Failure("unsupported operand type(s) for " + std::string(op) + ": '" + a.python_type() + "' and '" +
                b.python_type() + "'");
}

// Python integers are unbounded; ours are 64-bit and refuse to wrap.
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Failure("integer overflow (qinfer's integers are 64-bit)");
  return r;
}

int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) throw Failure("integer overflow (qinfer's integers are 64-bit)");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw Failure("integer overflow (qinfer's integers are 64-bit)");
  return r;
}

Value repeat(const Value& sequence, int64_t times) {
  if (times <= 0) return sequence.is_string() ? Value::string("") : Value::list({});
  if (sequence.is_string()) {
    if (sequence.str().size() * static_cast<size_t>(times) > kMaxRepeatedBytes)
      throw Failure("repeated string too long");
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.str();
    return Value::string(std::move(out));
  }
  if (sequence.items().size() * static_cast<size_t>(times) > kMaxRepeatedBytes / 16) {
    throw Failure("repeated list too long");
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.items().begin(), sequence.items().end());
  return sequence.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// CPython's float floor division: derived from fmod so that 1 // 0.1 is 9.0, not floor(1 / 0.1) = 10.0.
double python_float_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

double python_float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// Python's printf-style `text % args` for the conversions templates use: %s %r %d %i %f %%.
Value percent_format(const std::string& format, const Value& arguments) {
  ValueList positional = arguments.kind() == Value::Kind::kTuple ? arguments.items() : ValueList{arguments};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw Failure("incomplete format");
    const char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= positional.size()) throw Failure("not enough arguments for format string");
    const Value& value = positional[next++];
    switch (conversion) {
      case 's':
        value.append_output(out);
        break;
      case 'r':
        value.append_repr(out);
        break;
      case 'd':
      case 'i':
        if (!value.is_number()) throw Failure("%d format: a real number is required, not " + value.python_type());
        out += std::to_string(value.is_float() ? static_cast<int64_t>(value.as_double()) : value.as_int());
        break;
      case 'f': {
        if (!value.is_number()) throw Failure("must be real number, not " + value.python_type());
        char buffer[64];
        std::snprintf(buffer, sizeof(buffer), "%.6f", value.as_double());
        out += buffer;
        break;
      }
      default:
        throw Failure(std::string("unsupported format character '") + conversion + "'");
    }
  }
  if (next < positional.size()) throw Failure("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  a.require_defined();
  b.require_defined();
  const bool numbers = a.is_number() && b.is_number();
  const bool integers = numbers && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (integers) return Value::integer(checked_add(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > kMaxRepeatedBytes) throw Failure("concatenated string too long");
      return Value::string(a.str() + b.str());
    }
    if (a.kind() == b.kind() && a.is_sequence_kind()) {
      if (a.items().size() + b.items().size() > kMaxRepeatedBytes / 16) throw Failure("concatenated list too long");
      ValueList items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.kind() == Value::Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (a.is_string() || a.is_sequence_kind()) {
      throw Failure("can only concatenate " + a.python_type() + " (not \"" + b.python_type() + "\") to " +
                    a.python_type());
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (integers) return Value::integer(checked_sub(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (integers) return Value::integer(checked_mul(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_sequence_kind()) && b.is_number() && !b.is_float()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence_kind()) && a.is_number() && !a.is_float()) return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) throw Failure("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) throw Failure("integer division or modulo by zero");
    if (integers) {
      if (a.as_int() == INT64_MIN && b.as_int() == -1) throw Failure("integer overflow");
      int64_t q = a.as_int() / b.as_int();
      if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
      return Value::integer(q);
    }
    return Value::floating(python_float_floor_div(a.as_double(), b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return percent_format(a.str(), b);
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) throw Failure("integer division or modulo by zero");
    if (integers) {
      if (b.as_int() == -1) return Value::integer(0);
      int64_t m = a.as_int() % b.as_int();
      if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
      return Value::integer(m);
    }
    return Value::floating(python_float_mod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!numbers) unsupported(op, a, b);
    if (integers && b.as_int() >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) {
        result = checked_mul(result, a.as_int());
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0) throw Failure("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  throw Failure("unknown operator " + std::string(op));
}

Value undefined_member(const Value& object, std::string_view name) {
  // Built by appending: GCC 12 reports a false -Wrestrict on chained operator+ here.
  std::string message;
  if (object.is_none()) {
    message = "None";
  } else {
    message += '\'';
    message += object.type_name();
    message += '\'';
  }
  message += " has no attribute '";
  message.append(name);
  message += '\'';
  return Value::undefined(std::move(message));
}

Value undefined_element(const Value& object, const Value& key) {
  std::string repr;
  key.append_repr(repr);
  return Value::undefined((object.is_none() ? std::string("None") : object.type_name()) + " has no element " + repr);
}

bool is_unsafe_member(const Value& object, std::string_view name) {
  static constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
  static constexpr std::string_view kListMutators[] = {"append", "clear",  "extend",  "insert",
                                                       "pop",    "remove", "reverse", "sort"};
  if (object.is_dict()) {
    for (std::string_view m : kDictMutators) {
      if (m == name) return true;
    }
  }
  if (object.kind() == Value::Kind::kList) {
    for (std::string_view m : kListMutators) {
      if (m == name) return true;
    }
  }
  return name.size() > 1 && name[0] == '_';  // the sandbox hides private and dunder attributes
}

Value loop_attribute(const LoopState& loop, std::string_view name) {
  if (loop.items == nullptr) throw Failure("the loop object was used after its loop ended");
  const auto length = static_cast<int64_t>(loop.items->size());
  const auto index0 = static_cast<int64_t>(loop.index0);
  if (name == "index") return Value::integer(index0 + 1);
  if (name == "index0") return Value::integer(index0);
  if (name == "revindex") return Value::integer(length - index0);
  if (name == "revindex0") return Value::integer(length - index0 - 1);
  if (name == "first") return Value::boolean(index0 == 0);
  if (name == "last") return Value::boolean(index0 + 1 == length);
  if (name == "length") return Value::integer(length);
  if (name == "depth") return Value::integer(loop.depth);
  if (name == "depth0") return Value::integer(loop.depth - 1);
  if (name == "previtem") {
    return index0 > 0 ? (*loop.items)[loop.index0 - 1] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return index0 + 1 < length ? (*loop.items)[loop.index0 + 1] : Value::undefined("there is no next item");
  }
  return Value::undefined("'jinja2.runtime.LoopContext object' has no attribute '" + std::string(name) + "'");
}

// loop.cycle(...) and loop.changed(...) need the loop's state, so they are bound here rather than in methods.cpp.
Value loop_method(const Value& loop_value, std::string_view name) {
  const Value loop = loop_value;
  if (name == "cycle") {
    return Value::function("cycle", [loop](Interpreter&, CallArgs& args) {
      if (args.positional.empty()) throw Failure("no items for cycling given");
      return args.positional[loop.loop_state().index0 % args.positional.size()];
    });
  }
  return Value::function("changed", [loop](Interpreter&, CallArgs& args) {
    LoopState& state = loop.loop_state();
    const Value current = Value::tuple(args.positional);
    const bool changed = !state.has_changed_value || !values_equal(current, state.last_changed_value);
    state.has_changed_value = true;
    state.last_changed_value = current;
    return Value::boolean(changed);
  });
}

int64_t slice_index(const Value* bound, int64_t fallback) {
  if (bound == nullptr || bound->is_none()) return fallback;
  if (!bound->is_int() && !bound->is_bool()) {
    throw Failure("slice indices must be integers or None or have an __index__ method");
  }
  return bound->as_int();
}

}  // namespace

Value binary_operation(std::string_view op, const Value& left, const Value& right) {
  if (op == "~") {
    std::string text;
    left.append_output(text);
    right.append_output(text);
    if (text.size() > kMaxRepeatedBytes) throw Failure("concatenated string too long");
    return Value::string(std::move(text));
  }
  if (op == "==") return Value::boolean(values_equal(left, right));
  if (op == "!=") return Value::boolean(!values_equal(left, right));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    left.require_defined();  // Undefined refuses ordering, even against itself
    right.require_defined();
  }
  if (op == "<") return Value::boolean(value_less(left, right));
  if (op == ">") return Value::boolean(value_less(right, left));
  if (op == "<=") return Value::boolean(values_equal(left, right) || value_less(left, right));
  if (op == ">=") return Value::boolean(values_equal(left, right) || value_less(right, left));
  if (op == "in") return Value::boolean(contains(right, left));
  if (op == "not in") return Value::boolean(!contains(right, left));
  return arithmetic(op, left, right);
}

Value negate(const Value& operand) {
  operand.require_defined();
  if (operand.is_float()) return Value::floating(-operand.as_double());
  if (operand.is_number()) {
    if (operand.as_int() == INT64_MIN) throw Failure("integer overflow");
    return Value::integer(-operand.as_int());
  }
  throw Failure("bad operand type for unary -: '" + operand.python_type() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) throw Failure("'in <string>' requires string as left operand, not " + item.python_type());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& element : container.items()) {
        if (values_equal(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (item.kind() == Value::Kind::kList || item.kind() == Value::Kind::kDict) {
        throw Failure("unhashable type: '" + item.python_type() + "'");
      }
      return container.find(item) != nullptr;
    case Value::Kind::kUndefined:
      if (container.undefined_is_unsafe()) container.require_defined();
      return false;
    case Value::Kind::kGenerator: {  // Python consumes the generator up to and including the match
      Generator& generator = container.generator_state();
      while (generator.position < generator.items.size()) {
        if (values_equal(generator.items[generator.position++], item)) return true;
      }
      return false;
    }
    default:
      throw Failure("argument of type '" + container.python_type() + "' is not iterable");
  }
}

Value get_attribute(const Value& object, std::string_view name) {
  object.require_defined();
  if (is_unsafe_member(object, name)) {
    return Value::undefined(
        "access to attribute '" + std::string(name) + "' of '" + object.python_type() + "' object is unsafe.", true);
  }
  if (has_method(object, name)) {
    const Value receiver = object;
    const std::string method(name);
    return Value::function(
        method, [receiver, method](Interpreter&, CallArgs& args) { return call_method(receiver, method, args); });
  }
  switch (object.kind()) {
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (const Value* member = object.find(name)) return *member;
      break;
    case Value::Kind::kLoop:
      if (name == "cycle" || name == "changed") return loop_method(object, name);
      return loop_attribute(object.loop_state(), name);
    default:
      break;
  }
  return undefined_member(object, name);
}

Value get_item(const Value& object, const Value& key) {
  object.require_defined();
  switch (object.kind()) {
    case Value::Kind::kDict:
      if (const Value* member = object.find(key)) return *member;
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        int64_t index = key.as_int();
        if (object.is_string()) {
          const std::vector<size_t> offsets = code_point_offsets(object.str());
          const auto count = static_cast<int64_t>(offsets.size()) - 1;
          if (index < 0) index += count;
          if (index < 0 || index >= count) break;
          return Value::string(object.str().substr(offsets[index], offsets[index + 1] - offsets[index]));
        }
        const auto count = static_cast<int64_t>(object.items().size());
        if (index < 0) index += count;
        if (index < 0 || index >= count) break;
        return object.items()[static_cast<size_t>(index)];
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attribute(object, key.str());
  return undefined_element(object, key);
}

Value slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  object.require_defined();
  if (!object.is_string() && !object.is_sequence_kind()) {
    throw Failure("'" + object.python_type() + "' object is not subscriptable");
  }
  std::vector<size_t> offsets;
  int64_t length = 0;
  if (object.is_string()) {
    offsets = code_point_offsets(object.str());
    length = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    length = static_cast<int64_t>(object.items().size());
  }
  const int64_t stride = slice_index(step, 1);
  if (stride == 0) throw Failure("slice step cannot be zero");
  auto adjust = [&](const Value* bound, int64_t fallback) {
    if (bound == nullptr || bound->is_none()) return fallback;
    int64_t i = slice_index(bound, fallback);
    if (i < 0) {
      i += length;
      if (i < 0) i = stride < 0 ? -1 : 0;
    } else if (i >= length) {
      i = stride < 0 ? length - 1 : length;
    }
    return i;
  };
  const int64_t first = adjust(start, stride < 0 ? length - 1 : 0);
  const int64_t end = adjust(stop, stride < 0 ? -1 : length);
  std::string text;
  ValueList items;
  for (int64_t i = first; stride > 0 ? i < end : i > end; i += stride) {
    if (object.is_string()) {
      text.append(object.str(), offsets[i], offsets[i + 1] - offsets[i]);
    } else {
      items.push_back(object.items()[static_cast<size_t>(i)]);
    }
  }
  if (object.is_string()) return Value::string(std::move(text));
  return object.kind() == Value::Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

ValueList iterate(const Value& iterable) {
  switch (iterable.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return iterable.items();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(iterable.entries().size());
      for (const auto& entry : iterable.entries()) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList characters;
      const std::vector<size_t> offsets = code_point_offsets(iterable.str());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        characters.push_back(Value::string(iterable.str().substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return characters;
    }
    case Value::Kind::kUndefined:
      if (iterable.undefined_is_unsafe()) iterable.require_defined();
      return {};
    case Value::Kind::kGenerator:
      return iterable.generator_state().take_rest();
    default:
      throw Failure("'" + iterable.python_type() + "' object is not iterable");
  }
}

}  // namespace qinfer::jinja
