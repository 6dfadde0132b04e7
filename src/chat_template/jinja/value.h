// The dynamic value of the Jinja interpreter, modelled on the Python objects jinja2 works with: None, bool, int,
// float, str, list, tuple, dict, jinja2's Undefined and Namespace, the `loop` object, and callables.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qinfer::jinja {

// A template-level failure without a line number; the interpreter adds the line of the statement that failed.
class Failure : public std::runtime_error {
 public:
  explicit Failure(const std::string& message) : std::runtime_error(message) {}
};

class Value;
class Interpreter;
class Scope;
struct LoopState;
struct Generator;
struct Stmt;
using ValueList = std::vector<Value>;

// Keyword arguments of a call, in call order.
using KwArgs = std::vector<std::pair<std::string, Value>>;

struct CallArgs {
  ValueList positional;
  KwArgs keyword;
  // The keyword argument `name`, else the positional one at `index`, else nullptr.
  const Value* get(std::string_view name, size_t index) const;
  const Value* get(std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kLoop,
    kFunction,
    kGenerator
  };
  using Dict = std::vector<std::pair<Value, Value>>;  // insertion-ordered, like a Python dict

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {}, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value dict(Dict entries);
  static Value namespace_object(Dict attributes);
  static Value loop(std::shared_ptr<LoopState> state);
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);
  // A one-shot iterator over `items`; python_type is Python's name of its type, e.g. "generator".
  static Value generator(std::string python_type, ValueList items);
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_sequence_kind() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return flag_; }
  int64_t as_int() const { return int_; }  // also valid for bool (0/1)
  double as_double() const;                // int, bool or float
  const std::string& str() const;          // a string's text; empty for other kinds
  const ValueList& items() const { return *static_cast<const ValueList*>(payload_.get()); }
  const Dict& entries() const { return *static_cast<const Dict*>(payload_.get()); }
  // Namespaces and loop states are created mutable (set ns.x = ..., loop.changed()); the payload is stored const.
  Dict& namespace_attributes() const { return *const_cast<Dict*>(static_cast<const Dict*>(payload_.get())); }
  LoopState& loop_state() const { return *const_cast<LoopState*>(static_cast<const LoopState*>(payload_.get())); }
  const Function& function_object() const { return *static_cast<const Function*>(payload_.get()); }
  // Generators are consumed by iteration, so their state is mutable too.
  Generator& generator_state() const { return *const_cast<Generator*>(static_cast<const Generator*>(payload_.get())); }
  // For Undefined, str() is the message jinja2 raises when the value is used; empty for a plain undefined name.
  bool undefined_is_unsafe() const { return flag_; }

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Python str(): what `{{ value }}` prints. Throws Failure for an unsafe Undefined.
  std::string to_output() const;
  void append_output(std::string& out) const;
  // Python repr(), as used inside printed containers.
  void append_repr(std::string& out) const;
  // Python len(); -1 when the value has no length.
  int64_t length() const;
  // jinja2's name of the type, e.g. "dict object", for error messages.
  std::string type_name() const;
  // type(x).__name__ as Python's TypeErrors spell it, e.g. "dict".
  std::string python_type() const;

  // Dict lookup; nullptr when absent or not a dict.
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;

  // Nesting depth and whether a namespace is inside: namespaces may not be stored into namespaces, which (with the
  // depth bound) keeps every value acyclic and shallow enough to print, compare and destroy recursively.
  static constexpr int kMaxDepth = 512;
  int depth() const { return depth_; }
  bool holds_namespace() const { return holds_namespace_; }

  // Throws Failure with jinja2's message when the value is Undefined (for operations Undefined refuses).
  void require_defined() const;

 private:
  // Folds one element into a new container's depth_ and holds_namespace_; throws Failure beyond kMaxDepth.
  void add_element_facts(const Value& element);

  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;             // the bool's value, or "unsafe" for an Undefined
  bool holds_namespace_ = false;  // a namespace, or a container with one inside
  uint16_t depth_ = 0;            // container nesting (0 for scalars)
  int64_t int_ = 0;               // int value (also 0/1 for bool)
  double float_ = 0;
  // string (const std::string, also an Undefined's hint), list/tuple (const ValueList), dict (const Dict),
  // namespace (mutable Dict), loop (LoopState), function (const Function), generator (Generator)
  std::shared_ptr<const void> payload_;
};

// Python ==, as jinja2 evaluates it (1 == 1.0 == True; Undefined equals only Undefined).
bool values_equal(const Value& a, const Value& b);
// Python <; throws Failure for unorderable types.
bool value_less(const Value& a, const Value& b);

// The state behind jinja2's `loop` variable of one for-loop.
struct LoopState {
  const ValueList* items = nullptr;  // the (filtered) items iterated; null once the loop has ended
  size_t index0 = 0;
  int depth = 1;                         // 1 + how many recursive loop(...) calls led here
  const Stmt* recursive_loop = nullptr;  // the for statement, when it is marked `recursive`
  Scope* scope = nullptr;                // the scope the for statement runs in, for loop(...)
  bool has_changed_value = false;
  Value last_changed_value;
};

// What jinja2's map/select/reject/selectattr/rejectattr/unique/items filters return (Python generators) and what
// reverse returns for a list (a list_reverseiterator): a one-shot iterator. The items are computed when the filter
// runs (jinja2 computes them lazily, which only changes when an error inside shows up), but they are consumed as in
// Python: iterating takes what is left, so a second `| list` of the same generator is empty; a generator has no
// len(), is always true, and has no items by index.
struct Generator {
  std::string python_type;
  ValueList items;
  size_t position = 0;

  ValueList take_rest() {
    ValueList rest(items.begin() + static_cast<std::ptrdiff_t>(position), items.end());
    position = items.size();
    return rest;
  }
};

}  // namespace qinfer::jinja
