#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar_test_util.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  return testing::compile(json_schema_grammar(Json::parse(text)), testing::byte_vocab());
}

TEST(JsonSchema, ObjectInSchemaOrderWithOptionalProperties) {
  auto s = schema(R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"},
                      "c": {"type": "boolean"}}, "required": ["a"]})");
  EXPECT_TRUE(testing::matches(s, R"({"a": "x"})"));
  EXPECT_TRUE(testing::matches(s, R"({"b": -12, "a": "x", "c": true})"));
  EXPECT_TRUE(testing::matches(s, R"({"a": "", "c": false})"));
  EXPECT_FALSE(testing::matches(s, R"({"a": "x", "b": 1})"));  // schema order
  EXPECT_FALSE(testing::matches(s, R"({"b": 1})"));            // a is required
  EXPECT_FALSE(testing::matches(s, R"({"a":"x"})"));           // layout: ": "
  EXPECT_FALSE(testing::matches(s, R"({"a": "x", "d": 1})"));  // no additional properties
}

TEST(JsonSchema, AdditionalPropertiesAndAnyValues) {
  auto s = schema(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                      "additionalProperties": {"type": "number"}})");
  EXPECT_TRUE(testing::matches(s, R"({})"));
  EXPECT_TRUE(testing::matches(s, R"({"id": 1, "x": 2.5e3, "y": -0.5})"));
  EXPECT_TRUE(testing::matches(s, R"({"x": 2})"));
  EXPECT_FALSE(testing::matches(s, R"({"x": "no"})"));
  auto any = schema(R"({})");
  EXPECT_TRUE(testing::matches(any, R"({"a": [1, "x", null, {"b": false}], "c": {}})"));
  EXPECT_TRUE(testing::matches(any, R"("\u00e9\n\"")"));
  EXPECT_FALSE(testing::matches(any, R"({"a": 01})"));
}

TEST(JsonSchema, ArraysWithBoundsAndPrefixItems) {
  auto s = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  EXPECT_FALSE(testing::matches(s, "[]"));
  EXPECT_TRUE(testing::matches(s, "[1]"));
  EXPECT_TRUE(testing::matches(s, "[1, 2, 3]"));
  EXPECT_FALSE(testing::matches(s, "[1, 2, 3, 4]"));
  auto tuple = schema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "null"}]})");
  EXPECT_TRUE(testing::matches(tuple, R"(["a", null])"));
  EXPECT_TRUE(testing::matches(tuple, R"(["a"])"));
  EXPECT_TRUE(testing::matches(tuple, R"([])"));
  EXPECT_FALSE(testing::matches(tuple, R"(["a", null, 1])"));
}

TEST(JsonSchema, EnumConstAndCombinators) {
  auto s = schema(R"({"anyOf": [{"enum": ["red", 1, null]}, {"const": {"k": [1, 2]}},
                                {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                           {"properties": {"b": {"type": "null"}}}]}]})");
  EXPECT_TRUE(testing::matches(s, R"("red")"));
  EXPECT_TRUE(testing::matches(s, "null"));
  EXPECT_TRUE(testing::matches(s, R"({"k": [1, 2]})"));
  EXPECT_TRUE(testing::matches(s, R"({"a": 3, "b": null})"));
  EXPECT_FALSE(testing::matches(s, R"("blue")"));
  EXPECT_FALSE(testing::matches(s, R"({"b": null})"));
}

TEST(JsonSchema, RecursiveReferences) {
  auto s = schema(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
                      "$ref": "#/$defs/node"})");
  EXPECT_TRUE(testing::matches(s, R"({"v": 1, "children": [{"v": 2}, {"v": 3, "children": []}]})"));
  EXPECT_FALSE(testing::matches(s, R"({"v": 1, "children": [{}]})"));
}

TEST(JsonSchema, StringsLengthsPatternsFormats) {
  auto len = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(testing::matches(len, R"("ab")"));
  EXPECT_TRUE(testing::matches(len, R"("a\nb")"));  // an escape is one character
  EXPECT_TRUE(testing::matches(len, "\"\xC3\xA9\xC3\xA9\""));
  EXPECT_FALSE(testing::matches(len, R"("a")"));
  EXPECT_FALSE(testing::matches(len, R"("abcd")"));
  auto pattern = schema(R"({"type": "string", "pattern": "^[a-z]+-\\d$"})");
  EXPECT_TRUE(testing::matches(pattern, R"("ab-1")"));
  EXPECT_FALSE(testing::matches(pattern, R"("ab-12")"));
  auto date = schema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(testing::matches(date, R"("2024-02-29T13:45:00.5+01:00")"));
  EXPECT_FALSE(testing::matches(date, R"("2024-13-01T00:00:00Z")"));
  auto uuid = schema(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(testing::matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  auto ip = schema(R"({"type": "string", "format": "ipv4"})");
  EXPECT_TRUE(testing::matches(ip, R"("192.168.0.255")"));
  EXPECT_FALSE(testing::matches(ip, R"("256.1.1.1")"));
  auto email = schema(R"({"format": "email"})");
  EXPECT_TRUE(testing::matches(email, R"("a.b@example.com")"));
  EXPECT_FALSE(testing::matches(email, R"("a@b")"));
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  auto s = schema(R"({"type": "integer", "minimum": -15, "exclusiveMaximum": 243})");
  for (int v = -40; v <= 400; ++v) EXPECT_EQ(testing::matches(s, std::to_string(v)), v >= -15 && v < 243) << v;
  EXPECT_FALSE(testing::matches(s, "-0"));
  EXPECT_FALSE(testing::matches(s, "007"));
  auto positive = schema(R"({"type": "integer", "exclusiveMinimum": 0})");
  EXPECT_TRUE(testing::matches(positive, "1000000"));
  EXPECT_FALSE(testing::matches(positive, "0"));
  auto non_negative = schema(R"({"type": "number", "minimum": 0})");
  EXPECT_TRUE(testing::matches(non_negative, "0.5"));
  EXPECT_FALSE(testing::matches(non_negative, "-0.5"));
}

TEST(JsonSchema, TypeListsAndNullable) {
  auto s = schema(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(testing::matches(s, "null"));
  EXPECT_TRUE(testing::matches(s, R"("x")"));
  EXPECT_FALSE(testing::matches(s, "1"));
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    json_schema_grammar(Json::parse(text));
    FAIL() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(JsonSchema, UnenforceableKeywordsAreRefusedWithTheirPlace) {
  expect_error(R"({"properties": {"a": {"type": "array", "uniqueItems": true}}})",
               "schema error at '/properties/a': unsupported keyword 'uniqueItems'");
  expect_error(R"({"type": "object", "patternProperties": {}})", "unsupported keyword 'patternProperties'");
  expect_error(R"({"type": "number", "multipleOf": 2})", "unsupported keyword 'multipleOf'");
  expect_error(R"({"type": "number", "maximum": 5})", "'/maximum': bounds on 'number'");
  expect_error(R"({"type": "string", "format": "hostname"})", "format 'hostname' is not supported");
  expect_error(R"({"$ref": "#/$defs/missing"})", "does not resolve");
  expect_error(R"j({"type": "string", "pattern": "a(?=b)"})j", "'/pattern': regex error at position 3");
  expect_error(R"({"type": "object", "properties": {}, "required": ["x"]})", "'x' is not in properties");
  expect_error(R"({"type": "wat"})", "unknown type 'wat'");
  expect_error(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "allOf cannot be merged");
}

TEST(JsonSchema, LayoutOfConstValues) {
  EXPECT_EQ(json_layout(Json::parse(R"({"a":[1,{"b":"\n"}],"c":null})")), R"({"a": [1, {"b": "\n"}], "c": null})");
}

}  // namespace
}  // namespace qinfer::grammar
