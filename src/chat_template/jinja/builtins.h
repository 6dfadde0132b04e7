// The operations jinja2 gives templates beyond the grammar: Python operators and attribute/item access, filters,
// tests, methods of str/dict/list, and the global functions transformers provides. Each throws Failure with
// Python's or jinja2's message on misuse; the interpreter adds the template line.
#pragma once

#include <string_view>

#include "chat_template/jinja/value.h"

namespace qinfer::jinja {

// ---- operators.cpp ----
// `op` is one of + - * / // % ** ~ == != < > <= >= in "not in".
Value binary_operation(std::string_view op, const Value& left, const Value& right);
Value negate(const Value& operand);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// jinja2's sandboxed getattr (`obj.name`) and getitem (`obj[key]`), with Undefined for missing members.
Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// Python obj[start:stop:step] for str, list and tuple; null bounds are omitted ones.
Value slice(const Value& object, const Value* start, const Value* stop, const Value* step);
// The items a for-loop or filter iterates: list/tuple items, dict keys, str characters, nothing for Undefined.
ValueList iterate(const Value& iterable);

// ---- methods.cpp ----
bool has_method(const Value& receiver, std::string_view name);
Value call_method(const Value& receiver, std::string_view name, const CallArgs& args);

// ---- filters.cpp ----
// jinja2 refuses a template that names an unknown filter or test when it compiles it, not when it runs it.
bool is_filter_name(std::string_view name);
Value apply_filter(Interpreter& interpreter, std::string_view name, const Value& subject, const CallArgs& args);

// ---- tests.cpp ----
bool is_test_name(std::string_view name);
bool apply_test(Interpreter& interpreter, std::string_view name, const Value& subject, const CallArgs& args);

// ---- globals.cpp ----
// range, dict, namespace, raise_exception, strftime_now, cycler-free subset of jinja2's globals; nullptr if unknown.
const Value* find_global(std::string_view name);

}  // namespace qinfer::jinja
