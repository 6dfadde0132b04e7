// The JSON Schema converter's internals (json_schema.cpp: dispatch, references, combinators, any value;
// json_schema_values.cpp: objects, arrays, strings, numbers).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace qinfer::grammar {

using Json = nlohmann::ordered_json;

class SchemaConverter {
 public:
  SchemaConverter(Grammar& g, const Json& root, std::string prefix) : g_(g), root_(root), prefix_(std::move(prefix)) {}

  int32_t convert(const Json& schema, const std::string& path);
  int32_t any_value();  // rule: any JSON value
  int32_t any_object();

  [[noreturn]] static void fail(const std::string& path, const std::string& message);

 private:
  int32_t typed(const Json& schema, const std::string& type, const std::string& path);
  int32_t reference(const std::string& ref, const std::string& path);
  Json merge_all_of(const Json& schema, const std::string& path);
  int32_t object(const Json& schema, const std::string& path);
  int32_t array(const Json& schema, const std::string& path);
  int32_t string(const Json& schema, const std::string& path);
  int32_t integer(const Json& schema, const std::string& path);
  int32_t number(const Json& schema, const std::string& path);
  int32_t string_rule();  // rule: any JSON string
  int32_t chars_rule();   // rule: any run of string characters
  int32_t number_rule();
  int32_t integer_rule();
  int32_t rule(const std::string& name, int32_t expr) { return g_.add_rule(g_.unique_name(prefix_ + name), expr); }

  Grammar& g_;
  const Json& root_;
  std::string prefix_;
  std::map<std::string, int32_t> ref_rules_;  // JSON pointer -> rule
  int32_t any_value_ = -1, any_object_ = -1, string_ = -1, chars_ = -1, number_ = -1, integer_ = -1;
};

// The decimal integers in [lo, hi] (either bound may be absent) as an expression, no leading zeros.
int32_t integer_range(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace qinfer::grammar
