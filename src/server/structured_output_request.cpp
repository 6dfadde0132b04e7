#include "server/structured_output_request.h"

#include <cmath>

#include "server/api_error.h"

namespace qinfer::server {
namespace {

using Json = nlohmann::ordered_json;
using Kind = grammar::Constraint::Kind;

const Json* find(const Json& body, const std::string& name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A schema given as an object, or as a string holding one (vLLM accepts both).
grammar::Constraint schema_constraint(const Json& value, const std::string& param) {
  Json schema = value;
  if (value.is_string()) {
    schema = Json::parse(value.get<std::string>(), nullptr, false);
    if (schema.is_discarded()) throw invalid_field(param, param + " is a string that is not valid JSON");
  }
  if (!schema.is_object() && !schema.is_boolean()) throw invalid_field(param, param + " must be a JSON Schema object");
  return {Kind::kJsonSchema, schema.dump(), {}};
}

std::string string_value(const Json& value, const std::string& param) {
  if (!value.is_string()) throw invalid_field(param, param + " must be a string");
  return value.get<std::string>();
}

grammar::Constraint choice_constraint(const Json& value, const std::string& param) {
  if (!value.is_array() || value.empty()) throw invalid_field(param, param + " must be a non-empty array of strings");
  grammar::Constraint c{Kind::kChoice, {}, {}};
  for (const Json& item : value) c.choices.push_back(string_value(item, param));
  return c;
}

std::optional<StructuredOutput> response_format(const Json& body) {
  const Json* format = find(body, "response_format");
  if (!format) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    throw invalid_field("response_format", "response_format must be an object with a string 'type'");
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return StructuredOutput{{Kind::kJsonObject, {}, {}}, "response_format"};
  if (type != "json_schema")
    throw invalid_field("response_format.type",
                        "response_format.type must be \"text\", \"json_object\" or "
                        "\"json_schema\", got \"" +
                            type + "\"");
  const Json* spec = find(*format, "json_schema");
  if (!spec || !spec->is_object())
    throw invalid_field("response_format.json_schema", "response_format.json_schema must be an object");
  for (const char* field : {"name", "description"})
    if (const Json* v = find(*spec, field); v && !v->is_string())
      throw invalid_field(std::string("response_format.json_schema.") + field,
                          std::string("response_format.json_schema.") + field + " must be a string");
  if (const Json* strict = find(*spec, "strict"); strict && !strict->is_boolean())
    throw invalid_field("response_format.json_schema.strict", "response_format.json_schema.strict must be a boolean");
  const Json* schema = find(*spec, "schema");
  const std::string param = "response_format.json_schema.schema";
  if (!schema) throw invalid_field(param, param + " is required");
  return StructuredOutput{schema_constraint(*schema, param), param};
}

std::optional<StructuredOutput> structured_outputs(const Json& body) {
  const Json* spec = find(body, "structured_outputs");
  if (!spec) return std::nullopt;
  if (!spec->is_object()) throw invalid_field("structured_outputs", "structured_outputs must be an object");
  std::optional<StructuredOutput> out;
  const auto set = [&](grammar::Constraint c, const std::string& param) {
    if (out) throw invalid_field(param, "structured_outputs takes one of json, regex, choice, grammar, json_object");
    out = StructuredOutput{std::move(c), param};
  };
  for (const auto& [key, value] : spec->items()) {
    if (value.is_null()) continue;
    const std::string param = "structured_outputs." + key;
    if (key == "json")
      set(schema_constraint(value, param), param);
    else if (key == "regex")
      set({Kind::kRegex, string_value(value, param), {}}, param);
    else if (key == "choice")
      set(choice_constraint(value, param), param);
    else if (key == "grammar")
      set({Kind::kGrammar, string_value(value, param), {}}, param);
    else if (key == "json_object") {
      if (!value.is_boolean()) throw invalid_field(param, param + " must be a boolean");
      if (value.get<bool>()) set({Kind::kJsonObject, {}, {}}, param);
    } else if (key != "disable_fallback" && key != "disable_any_whitespace" && key != "whitespace_pattern") {
      throw invalid_field(param, param + " is not supported (json, regex, choice, grammar, json_object)");
    }
  }
  return out;
}

std::optional<StructuredOutput> guided_fields(const Json& body) {
  std::optional<StructuredOutput> out;
  const auto set = [&](grammar::Constraint c, const std::string& param) {
    if (out) throw invalid_field(param, param + " cannot be combined with " + out->param);
    out = StructuredOutput{std::move(c), param};
  };
  if (const Json* v = find(body, "guided_json")) set(schema_constraint(*v, "guided_json"), "guided_json");
  if (const Json* v = find(body, "guided_regex"))
    set({Kind::kRegex, string_value(*v, "guided_regex"), {}}, "guided_regex");
  if (const Json* v = find(body, "guided_choice")) set(choice_constraint(*v, "guided_choice"), "guided_choice");
  if (const Json* v = find(body, "guided_grammar"))
    set({Kind::kGrammar, string_value(*v, "guided_grammar"), {}}, "guided_grammar");
  return out;
}

}  // namespace

std::optional<StructuredOutput> parse_structured_output(const Json& body) {
  std::optional<StructuredOutput> found;
  for (auto parse : {response_format, structured_outputs, guided_fields}) {
    std::optional<StructuredOutput> next = parse(body);
    if (!next) continue;
    if (found)
      throw invalid_field(next->param, next->param + " cannot be combined with " + found->param +
                                           ": give one structured-output constraint");
    found = std::move(next);
  }
  return found;
}

std::vector<LogitBias> parse_logit_bias(const Json& body) {
  const Json* bias = find(body, "logit_bias");
  if (!bias) return {};
  if (!bias->is_object())
    throw invalid_field("logit_bias", "logit_bias must be an object mapping token ids to biases in [-100, 100]");
  std::vector<LogitBias> out;
  for (const auto& [key, value] : bias->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > INT32_MAX)
      throw invalid_field("logit_bias", "logit_bias keys must be token ids, got \"" + key + "\"");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100)
      throw invalid_field("logit_bias",
                          "logit_bias of token " + key + " must be a number in [-100, 100], got " + value.dump());
    out.push_back({static_cast<int32_t>(id), value.get<float>()});
  }
  return out;
}

}  // namespace qinfer::server
