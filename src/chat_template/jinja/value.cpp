#include "chat_template/jinja/value.h"

#include "chat_template/jinja/python_format.h"
#include "util/utf8.h"

namespace qinfer::jinja {

namespace {

const std::string& empty_text() {
  static const std::string kEmpty;
  return kEmpty;
}

// Number of code points in UTF-8 text (Python's len of a str), counted as slicing counts them.
int64_t count_code_points(const std::string& text) { return static_cast<int64_t>(utf8::count_code_points(text)); }

void append_sequence_repr(const ValueList& items, char open, char close, bool is_tuple, std::string& out) {
  out += open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    items[i].append_repr(out);
  }
  if (is_tuple && items.size() == 1) out += ',';
  out += close;
}

void append_dict_repr(const Value::Dict& entries, std::string& out) {
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ", ";
    entries[i].first.append_repr(out);
    out += ": ";
    entries[i].second.append_repr(out);
  }
  out += '}';
}

}  // namespace

const Value* CallArgs::get(std::string_view name, size_t index) const {
  if (const Value* by_name = get(name)) return by_name;
  return index < positional.size() ? &positional[index] : nullptr;
}

const Value* CallArgs::get(std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.flag_ = unsafe;
  if (!hint.empty()) v.payload_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.flag_ = b;
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.payload_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

void Value::add_element_facts(const Value& element) {
  holds_namespace_ = holds_namespace_ || element.holds_namespace_;
  if (element.depth_ + 1 > depth_) {
    if (element.depth_ + 1 > kMaxDepth) throw Failure("value nested more than 512 levels deep");
    depth_ = static_cast<uint16_t>(element.depth_ + 1);
  }
}

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = 1;
  for (const Value& item : items) v.add_element_facts(item);
  v.payload_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  for (const auto& [key, value] : entries) {
    v.add_element_facts(key);
    v.add_element_facts(value);
  }
  v.payload_ = std::make_shared<Dict>(std::move(entries));
  return v;
}

Value Value::namespace_object(Dict attributes) {
  Value v = dict(std::move(attributes));
  v.kind_ = Kind::kNamespace;
  v.holds_namespace_ = true;
  return v;
}

Value Value::loop(std::shared_ptr<LoopState> state) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.payload_ = std::move(state);
  return v;
}

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.payload_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

Value Value::generator(std::string python_type, ValueList items) {
  Value v;
  v.kind_ = Kind::kGenerator;
  for (const Value& item : items) v.add_element_facts(item);
  v.payload_ = std::make_shared<Generator>(Generator{std::move(python_type), std::move(items), 0});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(u));
      return floating(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& element : json) items.push_back(from_json(element));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict entries;
      entries.reserve(json.size());
      for (const auto& [key, element] : json.items()) entries.emplace_back(string(key), from_json(element));
      return dict(std::move(entries));
    }
    default:
      return none();  // binary and discarded values never come from parsed JSON text
  }
}

double Value::as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }

const std::string& Value::str() const {
  if ((kind_ == Kind::kString || kind_ == Kind::kUndefined) && payload_) {
    return *static_cast<const std::string*>(payload_.get());
  }
  return empty_text();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return flag_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !entries().empty();
    default:
      return true;
  }
}

std::string Value::to_output() const {
  std::string out;
  append_output(out);
  return out;
}

void Value::append_output(std::string& out) const {
  switch (kind_) {
    case Kind::kUndefined:
      if (flag_) throw Failure(str());
      return;
    case Kind::kString:
      out += str();
      return;
    default:
      append_repr(out);
  }
}

void Value::append_repr(std::string& out) const {
  switch (kind_) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += flag_ ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(int_);
      return;
    case Kind::kFloat:
      append_python_float(float_, out);
      return;
    case Kind::kString:
      append_python_string_repr(str(), out);
      return;
    case Kind::kList:
      append_sequence_repr(items(), '[', ']', false, out);
      return;
    case Kind::kTuple:
      append_sequence_repr(items(), '(', ')', true, out);
      return;
    case Kind::kDict:
      append_dict_repr(entries(), out);
      return;
    case Kind::kNamespace:
      out += "<Namespace ";
      append_dict_repr(entries(), out);
      out += '>';
      return;
    case Kind::kLoop:
      out += "<LoopContext " + std::to_string(loop_state().index0 + 1) + ">";
      return;
    case Kind::kFunction:
      out += "<function " + function_object().name + ">";
      return;
    case Kind::kGenerator:  // Python adds the object's address, which no template can rely on
      out += "<" + generator_state().python_type + " object>";
      return;
  }
}

int64_t Value::length() const {
  switch (kind_) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return count_code_points(str());
    case Kind::kList:
    case Kind::kTuple:
      return static_cast<int64_t>(items().size());
    case Kind::kDict:
      return static_cast<int64_t>(entries().size());
    default:
      return -1;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kNamespace:
      return "jinja2.utils.Namespace object";
    case Kind::kLoop:
      return "jinja2.runtime.LoopContext object";
    default:
      return python_type() + " object";
  }
}

std::string Value::python_type() const {
  switch (kind_) {
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kLoop:
      return "LoopContext";
    case Kind::kFunction:
      return "function";
    case Kind::kGenerator:
      return generator_state().python_type;
    case Kind::kUndefined:
      return "Undefined";
  }
  return "object";
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::kDict && kind_ != Kind::kNamespace) return nullptr;
  for (const auto& [k, v] : entries()) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const Value* Value::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  if (kind_ != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries()) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}

void Value::require_defined() const {
  if (kind_ != Kind::kUndefined) return;
  throw Failure(str().empty() ? "undefined value" : str());
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const ValueList& x = a.items();
      const ValueList& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [key, value] : a.entries()) {
        const Value* other = b.find(key);
        if (other == nullptr || !values_equal(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.namespace_attributes() == &b.namespace_attributes();
    case Value::Kind::kLoop:
      return &a.loop_state() == &b.loop_state();
    case Value::Kind::kFunction:
      return &a.function_object() == &b.function_object();
    case Value::Kind::kGenerator:
      return &a.generator_state() == &b.generator_state();
    default:
      return false;
  }
}

bool value_less(const Value& a, const Value& b) {
  a.require_defined();
  b.require_defined();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.kind() == b.kind() && a.is_sequence_kind()) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return value_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw Failure("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace qinfer::jinja
