// Global functions of transformers' chat-template environment: jinja2's range, dict and namespace, and
// transformers' raise_exception and strftime_now.
#include <ctime>
#include <string>
#include <utility>

#include "chat_template/jinja/builtins.h"

namespace qinfer::jinja {

namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range(Interpreter&, CallArgs& args) {
  if (!args.keyword.empty()) throw Failure("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) throw Failure("range expected 1 to 3 arguments");
  for (const Value& a : args.positional) {
    if (!a.is_int() && !a.is_bool())
      throw Failure("'" + a.type_name() + "' object cannot be interpreted as an integer");
  }
  int64_t start = 0;
  int64_t stop = args.positional[0].as_int();
  int64_t step = 1;
  if (args.positional.size() >= 2) {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
  }
  if (args.positional.size() == 3) step = args.positional[2].as_int();
  if (step == 0) throw Failure("range() arg 3 must not be zero");
  ValueList items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      throw Failure("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.push_back(Value::integer(i));
  }
  return Value::list(std::move(items));
}

Value::Dict keyword_entries(const CallArgs& args) {
  Value::Dict entries;
  for (const Value& positional : args.positional) {
    if (!positional.is_dict()) throw Failure("expected a mapping argument, got " + positional.type_name());
    entries.insert(entries.end(), positional.entries().begin(), positional.entries().end());
  }
  for (const auto& [name, value] : args.keyword) {
    bool replaced = false;
    for (auto& entry : entries) {
      if (entry.first.is_string() && entry.first.str() == name) {
        entry.second = value;
        replaced = true;
      }
    }
    if (!replaced) entries.emplace_back(Value::string(name), value);
  }
  return entries;
}

Value raise_exception(Interpreter&, CallArgs& args) {
  std::string message;
  if (const Value* m = args.get("message", 0)) message = m->to_output();
  throw Failure(message);
}

Value strftime_now(Interpreter&, CallArgs& args) {
  const Value* format = args.get("format", 0);
  if (format == nullptr || !format->is_string()) throw Failure("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[512];
  const size_t written = std::strftime(buffer, sizeof(buffer), format->str().c_str(), &local);
  return Value::string(std::string(buffer, written));
}

}  // namespace

const Value* find_global(std::string_view name) {
  static const std::pair<std::string_view, Value> kGlobals[] = {
      {"range", Value::function("range", range)},
      {"dict", Value::function("dict", [](Interpreter&, CallArgs& a) { return Value::dict(keyword_entries(a)); })},
      {"namespace",
       Value::function("namespace",
                       [](Interpreter&, CallArgs& a) { return Value::namespace_object(keyword_entries(a)); })},
      {"raise_exception", Value::function("raise_exception", raise_exception)},
      {"strftime_now", Value::function("strftime_now", strftime_now)},
  };
  for (const auto& [global_name, value] : kGlobals) {
    if (global_name == name) return &value;
  }
  return nullptr;
}

}  // namespace qinfer::jinja
