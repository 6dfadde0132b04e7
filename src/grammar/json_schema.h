// JSON Schema -> grammar. The documents generated are JSON in one layout: no whitespace except ", " between items
// and ": " after keys (Python's json.dumps default, what Qwen3 writes in tool calls); properties in the schema's
// order, required ones always present, optional ones skippable. Supported keywords: type (and type lists),
// properties, required, additionalProperties (true, false, a schema; absent means false), items, prefixItems,
// minItems, maxItems, enum, const, anyOf, oneOf (as anyOf), allOf (merged when the parts are compatible), $ref with
// $defs/definitions and JSON pointers (recursive too), minLength, maxLength, pattern (matching the whole string),
// format (date, time, date-time, email, uuid, uri, ipv4), minimum, maximum, exclusiveMinimum, exclusiveMaximum (on
// integers; on numbers only a bound of 0). Annotations (title, description, default, examples, ...) are ignored.
// Any other validation keyword is refused, naming it and where it is.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace qinfer::grammar {

// Adds the rules of `schema` to `g`; returns the rule matching its documents. `prefix` names the new rules.
// Throws Error(kInvalidArgument) "schema error at '/json/pointer': ...".
int32_t add_json_schema(Grammar& g, const nlohmann::ordered_json& schema, const std::string& prefix = "");

// A grammar whose root is the schema's documents.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);

// Any JSON object (response_format json_object), in the same layout.
Grammar json_object_grammar();

// The text a value is generated as, in the layout above (for const, enum and tests).
std::string json_layout(const nlohmann::ordered_json& value);

}  // namespace qinfer::grammar
