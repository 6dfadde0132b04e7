// The grammar of Hermes/Qwen3 tool calls, the shape the Qwen3 chat template renders them in:
//   <tool_call>\n{"name": "<a function>", "arguments": <its arguments>}\n</tool_call>
// with each function's arguments matching its parameters schema (or any JSON object for a function added without
// one). Calls come one after another separated by "\n".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace qinfer::grammar {

class ToolCallGrammarBuilder {
 public:
  // A function whose arguments must match `parameters` (a JSON Schema). Throws Error(kInvalidArgument) "schema error
  // at '/...': ..." for a schema that does not compile.
  void add_function(const std::string& name, const nlohmann::ordered_json& parameters);
  // A function whose arguments may be any JSON object.
  void add_unchecked_function(const std::string& name);

  // One or more calls (exactly one unless `parallel`), then the end of the output.
  Grammar calls(bool parallel) &&;
  // What follows a `<tool_call>` token already generated: one call's body and its closing tag.
  Grammar call_after_open_tag() &&;

 private:
  int32_t call_body();  // {"name": ..., "arguments": ...} for any of the functions added
  Grammar grammar_;
  std::vector<int32_t> alternatives_;  // per function: its {"name": ..., "arguments": ...}
};

// A grammar matching up to 4 bytes of leading whitespace (spaces, newlines) then `inner`'s language: what follows a closed
// reasoning span ("</think>\n\n").
Grammar with_leading_whitespace(Grammar inner);

}  // namespace qinfer::grammar
