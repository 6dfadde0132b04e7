// Objects, arrays, strings and numbers of the JSON Schema converter (json_schema_converter.h).
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "grammar/json_schema_converter.h"
#include "grammar/json_text.h"
#include "grammar/regex_parser.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

std::string child(const std::string& path, const std::string& key) { return path + "/" + key; }

int64_t non_negative_count(const Json& schema, const char* key, const std::string& path, int64_t fallback) {
  if (!schema.contains(key)) return fallback;
  const Json& v = schema[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    SchemaConverter::fail(child(path, key), "must be a non-negative integer");
  return v.get<int64_t>();
}

constexpr int64_t kMaxBound = 100000;

const char* format_regex(const std::string& format) {
  static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  static const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
  static const std::string date_time = date + "T" + time;
  static const std::string octet = R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  static const std::string ipv4 = "(" + octet + R"(\.){3})" + octet;
  static const std::string label = R"([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)";
  static const std::string email =
      R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@)" + label + R"((\.)" + label + ")+";
  static const std::string uuid = R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
  static const std::string uri = R"([A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+)";
  if (format == "date") return date.c_str();
  if (format == "time") return time.c_str();
  if (format == "date-time") return date_time.c_str();
  if (format == "ipv4") return ipv4.c_str();
  if (format == "email") return email.c_str();
  if (format == "uuid") return uuid.c_str();
  if (format == "uri") return uri.c_str();
  return nullptr;
}

}  // namespace

int32_t SchemaConverter::chars_rule() {
  // The character expression inline (not a call per character): the run is one automaton loop, so walking a token
  // through a string costs one transition per byte.
  if (chars_ < 0) chars_ = rule("json-chars", g_.star(json_any_string_char(g_)));
  return chars_;
}

int32_t SchemaConverter::string_rule() {
  if (string_ < 0) string_ = rule("json-string", g_.sequence({g_.byte('"'), g_.reference(chars_rule()), g_.byte('"')}));
  return string_;
}

int32_t SchemaConverter::integer_rule() {
  if (integer_ < 0) integer_ = rule("json-integer", integer_range(g_, std::nullopt, std::nullopt));
  return integer_;
}

int32_t SchemaConverter::number_rule() {
  if (number_ < 0) number_ = rule("json-number", regex_expression(g_, R"(-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)"));
  return number_;
}

int32_t SchemaConverter::object(const Json& schema, const std::string& path) {
  const Json empty = Json::object();
  const Json& properties = schema.contains("properties") ? schema["properties"] : empty;
  if (!properties.is_object()) fail(child(path, "properties"), "must be an object");
  std::vector<std::string> required;
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) fail(child(path, "required"), "must be an array of names");
    for (const Json& name : schema["required"]) {
      if (!name.is_string()) fail(child(path, "required"), "must be an array of names");
      if (!properties.contains(name.get<std::string>()))
        fail(child(path, "required"), "required property '" + name.get<std::string>() + "' is not in properties");
      required.push_back(name.get<std::string>());
    }
  }
  // additionalProperties: absent or false -> none (strict); true or a schema -> any number after the named ones.
  int32_t additional = -1;
  if (schema.contains("additionalProperties") && schema["additionalProperties"] != false) {
    const int32_t value = g_.reference(
        rule("additional-value", convert(schema["additionalProperties"], child(path, "additionalProperties"))));
    additional = rule("additional-property", g_.sequence({g_.reference(string_rule()), g_.literal(": "), value}));
  }
  struct Property {
    int32_t rule;
    bool required;
  };
  std::vector<Property> props;
  for (const auto& [name, prop_schema] : properties.items()) {
    const int32_t value = convert(prop_schema, child(child(path, "properties"), name));
    const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
    props.push_back({rule("property-" + name, g_.sequence({g_.literal(json_quote(name) + ": "), value})), is_required});
  }
  // tail[i]: the members after property i - 1, each written after ", ".
  const size_t n = props.size();
  std::vector<int32_t> tail(n + 1);
  tail[n] = additional >= 0 ? rule("object-rest", g_.star(g_.sequence({g_.literal(", "), g_.reference(additional)})))
                            : rule("object-end", g_.empty());
  for (size_t i = n; i-- > 0;) {
    const int32_t member = g_.sequence({g_.literal(", "), g_.reference(props[i].rule), g_.reference(tail[i + 1])});
    tail[i] = rule("object-tail", props[i].required ? member : g_.choice({member, g_.reference(tail[i + 1])}));
  }
  // The first member present: property j (all before it optional), or an additional one, or none.
  std::vector<int32_t> firsts;
  bool all_optional_before = true;
  for (size_t j = 0; j < n && all_optional_before; ++j) {
    firsts.push_back(g_.sequence({g_.reference(props[j].rule), g_.reference(tail[j + 1])}));
    all_optional_before = !props[j].required;
  }
  if (all_optional_before) {
    if (additional >= 0) firsts.push_back(g_.sequence({g_.reference(additional), g_.reference(tail[n])}));
    firsts.push_back(g_.empty());
  }
  return g_.sequence({g_.byte('{'), g_.choice(std::move(firsts)), g_.byte('}')});
}

int32_t SchemaConverter::array(const Json& schema, const std::string& path) {
  const int64_t min = non_negative_count(schema, "minItems", path, 0);
  const int64_t max = non_negative_count(schema, "maxItems", path, -1);
  if (max >= 0 && max < min) fail(child(path, "maxItems"), "is below minItems");
  std::vector<int32_t> prefix;
  if (schema.contains("prefixItems")) {
    if (!schema["prefixItems"].is_array()) fail(child(path, "prefixItems"), "must be an array of schemas");
    for (size_t i = 0; i < schema["prefixItems"].size(); ++i)
      prefix.push_back(
          rule("item", convert(schema["prefixItems"][i], child(child(path, "prefixItems"), std::to_string(i)))));
  }
  // Items after the prefix: `items` (false: none); without `items`, none after a prefix, any value otherwise.
  int32_t rest = -1;
  if (schema.contains("items")) {
    if (schema["items"] != false) rest = rule("item", convert(schema["items"], child(path, "items")));
  } else if (prefix.empty()) {
    rest = any_value();
  }
  const int64_t n = static_cast<int64_t>(prefix.size());
  const int64_t capacity = rest >= 0 ? max : std::min<int64_t>(max < 0 ? n : max, n);
  if (capacity >= 0 && capacity < min) fail(path, "minItems cannot be met by the items allowed");
  if (min > kMaxBound || capacity > kMaxBound) fail(path, "item bounds over " + std::to_string(kMaxBound));
  // after(i): the elements from index i on, each after ", ".
  const auto sep = [&](int32_t r) { return g_.sequence({g_.literal(", "), g_.reference(r)}); };
  std::function<int32_t(int64_t)> after = [&](int64_t i) -> int32_t {
    if (capacity >= 0 && i >= capacity) return g_.empty();
    if (i >= n) {
      const int64_t lo = std::max<int64_t>(0, min - i);
      const int64_t hi = capacity < 0 ? -1 : capacity - i;
      return g_.repeat(sep(rest), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    }
    const int32_t element = g_.sequence({sep(prefix[static_cast<size_t>(i)]), after(i + 1)});
    return i < min ? element : g_.optional(element);
  };
  const int32_t first = n > 0 ? prefix[0] : rest;
  int32_t elements = g_.empty();
  if (first >= 0 && capacity != 0) {
    elements = g_.sequence({g_.reference(first), after(1)});
    if (min == 0) elements = g_.optional(elements);
  }
  return g_.sequence({g_.byte('['), elements, g_.byte(']')});
}

int32_t SchemaConverter::string(const Json& schema, const std::string& path) {
  const bool has_length = schema.contains("minLength") || schema.contains("maxLength");
  const int64_t min = non_negative_count(schema, "minLength", path, 0);
  const int64_t max = non_negative_count(schema, "maxLength", path, -1);
  if (max >= 0 && max < min) fail(child(path, "maxLength"), "is below minLength");
  if (schema.contains("pattern") || schema.contains("format")) {
    if (has_length) fail(path, "minLength/maxLength together with pattern or format are not supported");
    if (schema.contains("pattern") && schema.contains("format"))
      fail(path, "pattern together with format is not supported");
    std::string regex;
    std::string where;
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) fail(child(path, "pattern"), "must be a string");
      regex = schema["pattern"].get<std::string>();
      where = child(path, "pattern");
    } else {
      if (!schema["format"].is_string()) fail(child(path, "format"), "must be a string");
      const char* r = format_regex(schema["format"].get<std::string>());
      if (!r) fail(child(path, "format"), "format '" + schema["format"].get<std::string>() + "' is not supported");
      regex = r;
      where = child(path, "format");
    }
    int32_t body;
    try {
      body = regex_expression(g_, regex, RegexOptions{true});
    } catch (const Error& e) {
      fail(where, e.what());
    }
    return g_.sequence({g_.byte('"'), g_.reference(rule("string-pattern", body)), g_.byte('"')});
  }
  if (!has_length) return g_.reference(string_rule());
  if (min > kMaxBound || max > kMaxBound) fail(path, "string length bounds over " + std::to_string(kMaxBound));
  const int32_t chars = g_.repeat(json_any_string_char(g_), static_cast<int32_t>(min), static_cast<int32_t>(max));
  return g_.sequence({g_.byte('"'), chars, g_.byte('"')});
}

int32_t SchemaConverter::integer(const Json& schema, const std::string& path) {
  std::optional<int64_t> lo, hi;
  const auto bound = [&](const char* key, bool lower, bool exclusive) {
    if (!schema.contains(key)) return;
    const Json& v = schema[key];
    if (!v.is_number()) fail(child(path, key), "must be a number");
    const double d = v.get<double>();
    if (std::abs(d) > 9e15) fail(child(path, key), "is out of the supported range");
    int64_t b = lower ? static_cast<int64_t>(std::ceil(d)) : static_cast<int64_t>(std::floor(d));
    if (exclusive && static_cast<double>(b) == d) b += lower ? 1 : -1;
    if (lower)
      lo = lo ? std::max(*lo, b) : b;
    else
      hi = hi ? std::min(*hi, b) : b;
  };
  bound("minimum", true, false);
  bound("exclusiveMinimum", true, true);
  bound("maximum", false, false);
  bound("exclusiveMaximum", false, true);
  if (lo && hi && *lo > *hi) fail(path, "the bounds leave no integer");
  if (!lo && !hi) return g_.reference(integer_rule());
  return integer_range(g_, lo, hi);
}

int32_t SchemaConverter::number(const Json& schema, const std::string& path) {
  bool non_negative = false, positive = false;
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!schema.contains(key)) continue;
    const Json& v = schema[key];
    const std::string where = child(path, key);
    if (!v.is_number()) fail(where, "must be a number");
    if (std::string(key) == "minimum" && v.get<double>() == 0)
      non_negative = true;
    else if (std::string(key) == "exclusiveMinimum" && v.get<double>() == 0)
      positive = true;
    else
      fail(where, "bounds on 'number' other than minimum 0 / exclusiveMinimum 0 are not supported (use an integer)");
  }
  if (!non_negative && !positive) return g_.reference(number_rule());
  // Non-negative: no sign. Positive: additionally not zero (a digit 1-9 somewhere before the exponent).
  const std::string unsigned_number = R"((0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)";
  const std::string positive_number = R"(([1-9]\d*(\.\d+)?|0\.\d*[1-9]\d*)([eE][+-]?\d+)?)";
  return regex_expression(g_, positive ? positive_number : unsigned_number);
}

}  // namespace qinfer::grammar
