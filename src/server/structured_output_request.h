// Structured-output and logit_bias fields of the OpenAI and vLLM request bodies, parsed into a grammar constraint:
//   response_format: {"type": "text"} | {"type": "json_object"} |
//                    {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}
//   structured_outputs (vLLM): {"json": schema} | {"regex": R} | {"choice": [...]} | {"grammar": GBNF} |
//                              {"json_object": true}
//   guided_json / guided_regex / guided_choice / guided_grammar (vLLM's older fields)
// At most one of them may ask for a constraint. A constraint is always enforced (strict: false too).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampling.h"
#include "grammar/grammar_compiler.h"

namespace qinfer::server {

struct StructuredOutput {
  grammar::Constraint constraint;
  std::string param;  // the request field that holds it, named in compile errors
};

// Throws ApiError 400 naming the field for a malformed value, an unknown response_format type, or two constraints.
std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body);

// OpenAI logit_bias: {"token id": bias}; ids must be integers, biases in [-100, 100]. (Ids are checked against the
// vocabulary by the engine.)
std::vector<LogitBias> parse_logit_bias(const nlohmann::ordered_json& body);

}  // namespace qinfer::server
