#include "server/structured_output_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace qinfer::server {
namespace {

using Json = nlohmann::ordered_json;
using Kind = grammar::Constraint::Kind;

std::string refused_param(const Json& body) {
  try {
    parse_structured_output(body);
    parse_logit_bias(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().value_or("<none>");
  }
  return "";
}

TEST(StructuredOutputRequest, ResponseFormats) {
  EXPECT_FALSE(parse_structured_output(Json::parse(R"({"response_format": {"type": "text"}})")));
  EXPECT_FALSE(parse_structured_output(Json::parse(R"({})")));
  auto object = parse_structured_output(Json::parse(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_TRUE(object);
  EXPECT_EQ(object->constraint.kind, Kind::kJsonObject);
  // The schema keeps its key order (properties are generated in it).
  auto schema = parse_structured_output(Json::parse(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "x", "strict": true, "schema": {"type": "object", "properties": {"z": {}, "a": {}}}}}})"));
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(schema->constraint.source, R"({"type":"object","properties":{"z":{},"a":{}}})");
  EXPECT_EQ(schema->param, "response_format.json_schema.schema");
}

TEST(StructuredOutputRequest, VllmFields) {
  auto regex = parse_structured_output(Json::parse(R"({"structured_outputs": {"regex": "a+"}})"));
  ASSERT_TRUE(regex);
  EXPECT_EQ(regex->constraint.kind, Kind::kRegex);
  EXPECT_EQ(regex->param, "structured_outputs.regex");
  auto choice = parse_structured_output(Json::parse(R"({"guided_choice": ["yes", "no"]})"));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->constraint.choices, (std::vector<std::string>{"yes", "no"}));
  auto json = parse_structured_output(Json::parse(R"({"guided_json": "{\"type\": \"integer\"}"})"));
  ASSERT_TRUE(json);
  EXPECT_EQ(json->constraint.source, R"({"type":"integer"})");
  auto grammar = parse_structured_output(Json::parse(R"({"structured_outputs": {"grammar": "root ::= \"a\""}})"));
  ASSERT_TRUE(grammar);
  EXPECT_EQ(grammar->constraint.kind, Kind::kGrammar);
}

TEST(StructuredOutputRequest, BadFieldsNameTheParam) {
  EXPECT_EQ(refused_param(Json::parse(R"({"response_format": {"type": "xml_please"}})")), "response_format.type");
  EXPECT_EQ(refused_param(Json::parse(R"({"response_format": {"type": "json_schema"}})")),
            "response_format.json_schema");
  EXPECT_EQ(refused_param(Json::parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})")),
            "response_format.json_schema.schema");
  EXPECT_EQ(refused_param(Json::parse(R"({"response_format": "json"})")), "response_format");
  EXPECT_EQ(refused_param(Json::parse(R"({"guided_regex": "a", "guided_choice": ["b"]})")), "guided_choice");
  EXPECT_EQ(refused_param(Json::parse(R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})")),
            "guided_regex");
  EXPECT_EQ(refused_param(Json::parse(R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})")),
            "structured_outputs.choice");
  EXPECT_EQ(refused_param(Json::parse(R"({"structured_outputs": {"xml": "a"}})")), "structured_outputs.xml");
  EXPECT_EQ(refused_param(Json::parse(R"({"guided_json": "{not json"})")), "guided_json");
  EXPECT_EQ(refused_param(Json::parse(R"({"logit_bias": {"abc": 1}})")), "logit_bias");
  EXPECT_EQ(refused_param(Json::parse(R"({"logit_bias": {"5": 101}})")), "logit_bias");
  EXPECT_EQ(refused_param(Json::parse(R"({"logit_bias": [1]})")), "logit_bias");
}

TEST(StructuredOutputRequest, LogitBias) {
  const auto bias = parse_logit_bias(Json::parse(R"({"logit_bias": {"42": -100, "7": 2.5}})"));
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0].token, 42);
  EXPECT_EQ(bias[0].bias, -100.0f);
  EXPECT_EQ(bias[1].token, 7);
  EXPECT_EQ(bias[1].bias, 2.5f);
}

}  // namespace
}  // namespace qinfer::server
