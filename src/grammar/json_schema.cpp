#include "grammar/json_schema.h"

#include <set>

#include "grammar/json_schema_converter.h"
#include "grammar/json_text.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

// Keywords that only describe a schema; they change no document's validity.
const std::set<std::string> kAnnotations{"title",         "description", "default",         "examples", "$schema",
                                         "$id",           "$comment",    "deprecated",      "readOnly", "writeOnly",
                                         "discriminator", "$anchor",     "contentMediaType"};
// Validation keywords we enforce.
const std::set<std::string> kSupported{"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf",
                                       "allOf",
                                       "$ref",
                                       "$defs",
                                       "definitions",
                                       "minLength",
                                       "maxLength",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum"};

std::string child(const std::string& path, const std::string& key) {
  std::string escaped;
  for (char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return path + "/" + escaped;
}

void layout(const Json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += json_quote(k) + ": ";
      layout(item, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      layout(v[i], out);
    }
    out += ']';
  } else if (v.is_string()) {
    out += json_quote(v.get<std::string>());
  } else {
    out += v.dump();
  }
}

}  // namespace

std::string json_layout(const Json& value) {
  std::string out;
  layout(value, out);
  return out;
}

void SchemaConverter::fail(const std::string& path, const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, "schema error at '" + (path.empty() ? "/" : path) + "': " + message);
}

int32_t SchemaConverter::convert(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return g_.reference(any_value());
    fail(path, "the schema false matches nothing");
  }
  if (!schema.is_object()) fail(path, "a schema must be an object or a boolean");
  for (const auto& [key, value] : schema.items()) {
    if (kSupported.count(key) || kAnnotations.count(key)) continue;
    fail(path, "unsupported keyword '" + key + "'");
  }
  if (schema.contains("$ref")) {
    for (const auto& [key, value] : schema.items())
      if (kSupported.count(key) && key != "$ref" && key != "$defs" && key != "definitions")
        fail(path, "'$ref' beside '" + key + "' is not supported");
    if (!schema["$ref"].is_string()) fail(child(path, "$ref"), "must be a string");
    return g_.reference(reference(schema["$ref"].get<std::string>(), child(path, "$ref")));
  }
  if (schema.contains("allOf")) return convert(merge_all_of(schema, path), path);
  if (schema.contains("const")) return g_.literal(json_layout(schema["const"]));
  if (schema.contains("enum")) {
    const Json& values = schema["enum"];
    if (!values.is_array() || values.empty()) fail(child(path, "enum"), "must be a non-empty array");
    std::vector<int32_t> alts;
    for (const Json& v : values) alts.push_back(g_.literal(json_layout(v)));
    return g_.choice(std::move(alts));
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    const Json& parts = schema[key];
    if (!parts.is_array() || parts.empty()) fail(child(path, key), "must be a non-empty array");
    Json base = schema;
    base.erase(key);
    std::vector<int32_t> alts;
    for (size_t i = 0; i < parts.size(); ++i) {
      // Sibling keywords apply to every alternative (e.g. {"type": "object", "anyOf": [{"required": [...]}, ...]}).
      Json part = parts[i];
      if (part.is_object() && base.size() > 0 && !part.contains("$ref"))
        for (const auto& [k, v] : base.items())
          if (!part.contains(k)) part[k] = v;
      alts.push_back(convert(part, child(child(path, key), std::to_string(i))));
    }
    return g_.choice(std::move(alts));
  }
  if (schema.contains("type")) {
    const Json& type = schema["type"];
    if (type.is_string()) return typed(schema, type.get<std::string>(), path);
    if (!type.is_array() || type.empty()) fail(child(path, "type"), "must be a string or a non-empty array");
    std::vector<int32_t> alts;
    for (const Json& t : type) {
      if (!t.is_string()) fail(child(path, "type"), "must list type names");
      alts.push_back(typed(schema, t.get<std::string>(), path));
    }
    return g_.choice(std::move(alts));
  }
  // No type: the one the keywords imply, else any value.
  if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties"))
    return typed(schema, "object", path);
  if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") ||
      schema.contains("maxItems"))
    return typed(schema, "array", path);
  if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("pattern") ||
      schema.contains("format"))
    return typed(schema, "string", path);
  if (schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
      schema.contains("exclusiveMaximum"))
    return typed(schema, "number", path);
  return g_.reference(any_value());
}

int32_t SchemaConverter::typed(const Json& schema, const std::string& type, const std::string& path) {
  if (type == "object") return object(schema, path);
  if (type == "array") return array(schema, path);
  if (type == "string") return string(schema, path);
  if (type == "integer") return integer(schema, path);
  if (type == "number") return number(schema, path);
  if (type == "boolean") return g_.choice({g_.literal("true"), g_.literal("false")});
  if (type == "null") return g_.literal("null");
  fail(child(path, "type"), "unknown type '" + type + "'");
}

int32_t SchemaConverter::reference(const std::string& ref, const std::string& path) {
  if (ref.empty() || ref[0] != '#')
    fail(path, "only references inside the schema ('#...') are supported, got '" + ref + "'");
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return it->second;
  const Json* target = &root_;
  try {
    const std::string pointer = ref.substr(1);
    if (!pointer.empty()) target = &root_.at(Json::json_pointer(pointer));
  } catch (const std::exception&) {
    fail(path, "reference '" + ref + "' does not resolve");
  }
  std::string name = ref == "#" ? "root" : ref.substr(ref.rfind('/') + 1);
  const int32_t rule = g_.declare_rule(g_.unique_name(prefix_ + "ref-" + name));
  ref_rules_[ref] = rule;
  g_.set_body(rule, convert(*target, ref.substr(1)));
  return rule;
}

Json SchemaConverter::merge_all_of(const Json& schema, const std::string& path) {
  Json merged = schema;
  merged.erase("allOf");
  const Json& parts = schema["allOf"];
  if (!parts.is_array() || parts.empty()) fail(child(path, "allOf"), "must be a non-empty array");
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part_path = child(child(path, "allOf"), std::to_string(i));
    Json part = parts[i];
    for (int depth = 0; part.is_object() && part.contains("$ref") && depth < 32; ++depth) {
      const std::string ref = part["$ref"].get<std::string>();
      try {
        part = ref == "#" ? root_ : root_.at(Json::json_pointer(ref.substr(1)));
      } catch (const std::exception&) {
        fail(part_path, "reference '" + ref + "' does not resolve");
      }
    }
    if (!part.is_object()) fail(part_path, "allOf parts must be schema objects");
    if (part.contains("allOf")) part = merge_all_of(part, part_path);
    for (const auto& [key, value] : part.items()) {
      if (kAnnotations.count(key)) continue;
      if (key == "properties") {
        for (const auto& [name, prop] : value.items()) {
          if (merged["properties"].contains(name) && merged["properties"][name] != prop)
            fail(part_path, "allOf cannot be merged: property '" + name + "' is defined differently");
          merged["properties"][name] = prop;
        }
      } else if (key == "required") {
        for (const Json& name : value)
          if (!merged.contains("required") ||
              std::find(merged["required"].begin(), merged["required"].end(), name) == merged["required"].end())
            merged["required"].push_back(name);
      } else if (merged.contains(key) && merged[key] != value) {
        fail(part_path, "allOf cannot be merged: '" + key + "' differs between its parts");
      } else {
        merged[key] = value;
      }
    }
  }
  return merged;
}

int32_t SchemaConverter::any_value() {
  if (any_value_ >= 0) return any_value_;
  any_value_ = g_.declare_rule(g_.unique_name(prefix_ + "json-value"));
  const int32_t array_rule = g_.declare_rule(g_.unique_name(prefix_ + "json-array"));
  const int32_t value = g_.reference(any_value_);
  g_.set_body(
      array_rule,
      g_.sequence(
          {g_.byte('['),
           g_.optional(g_.sequence({value, g_.star(g_.sequence({g_.literal(", "), g_.reference(any_value_)}))})),
           g_.byte(']')}));
  g_.set_body(any_value_,
              g_.choice({g_.reference(any_object()), g_.reference(array_rule), g_.reference(string_rule()),
                         g_.reference(number_rule()), g_.literal("true"), g_.literal("false"), g_.literal("null")}));
  return any_value_;
}

int32_t SchemaConverter::any_object() {
  if (any_object_ >= 0) return any_object_;
  any_object_ = g_.declare_rule(g_.unique_name(prefix_ + "json-object"));
  const int32_t value = any_value();
  const auto member = [&] { return g_.sequence({g_.reference(string_rule()), g_.literal(": "), g_.reference(value)}); };
  g_.set_body(any_object_,
              g_.sequence({g_.byte('{'),
                           g_.optional(g_.sequence({member(), g_.star(g_.sequence({g_.literal(", "), member()}))})),
                           g_.byte('}')}));
  return any_object_;
}

int32_t add_json_schema(Grammar& g, const Json& schema, const std::string& prefix) {
  SchemaConverter converter(g, schema, prefix);
  const int32_t expr = converter.convert(schema, "");
  return g.add_rule(g.unique_name(prefix + "schema"), expr);
}

Grammar json_schema_grammar(const Json& schema) {
  Grammar g;
  g.set_root(add_json_schema(g, schema));
  return g;
}

Grammar json_object_grammar() {
  Grammar g;
  const Json empty = Json::object();
  SchemaConverter converter(g, empty, "");
  g.set_root(converter.any_object());
  return g;
}

}  // namespace qinfer::grammar
