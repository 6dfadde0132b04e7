#include "server/output_constraint.h"

#include "grammar/tool_call_grammar.h"
#include "server/api_error.h"
#include "util/error.h"

namespace qinfer::server {
namespace {

using Json = nlohmann::ordered_json;
using Kind = grammar::Constraint::Kind;

bool is_strict(const Json& tool) {
  const Json& function = tool["function"];
  return function.contains("strict") && function["strict"].is_boolean() && function["strict"].get<bool>();
}

// The calls the request generates under a grammar: none, all of them (required / named), or only once opened (auto
// with at least one strict tool).
enum class ToolGrammar { kNone, kWholeOutput, kTriggered };

ToolGrammar tool_grammar_mode(const CompletionWork& work) {
  if (!work.parse_tool_calls || work.chat.tools.is_null()) return ToolGrammar::kNone;
  if (work.tool_choice == "required" || work.tool_choice == "function") return ToolGrammar::kWholeOutput;
  for (const Json& tool : work.chat.tools)
    if (is_strict(tool)) return ToolGrammar::kTriggered;
  return ToolGrammar::kNone;
}

// The tool-call grammar and its cache key. Under a whole-output grammar every offered function's arguments follow
// its schema; under a triggered one only the strict functions' do.
std::pair<grammar::Grammar, std::string> tool_call_grammar(const CompletionWork& work, ToolGrammar mode) {
  grammar::ToolCallGrammarBuilder builder;
  Json key_tools = Json::array();
  const Json& tools = work.chat.tools;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& function = tools[i]["function"];
    const std::string name = function["name"].get<std::string>();
    if (work.tool_choice == "function" && name != work.forced_tool) continue;
    const bool checked = mode == ToolGrammar::kWholeOutput || is_strict(tools[i]);
    const Json parameters = function.contains("parameters") && function["parameters"].is_object()
                                ? function["parameters"]
                                : Json{{"type", "object"}, {"properties", Json::object()}};
    const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
    try {
      if (checked)
        builder.add_function(name, parameters);
      else
        builder.add_unchecked_function(name);
    } catch (const Error& e) {
      throw invalid_field(param, param + ": " + e.what());
    }
    key_tools.push_back(Json{{"name", name}, {"parameters", checked ? parameters : Json(nullptr)}});
  }
  const bool parallel = work.parallel_tool_calls && work.tool_choice != "function";
  std::string key = "tool_calls:" + std::string(mode == ToolGrammar::kTriggered ? "after-open-tag:" : "calls:") +
                    (parallel ? "parallel:" : "single:") + key_tools.dump();
  if (mode == ToolGrammar::kTriggered) return {std::move(builder).call_after_open_tag(), std::move(key)};
  return {std::move(builder).calls(parallel), std::move(key)};
}

}  // namespace

void apply_output_constraint(const CompletionWork& work, const Tokenizer& tokenizer, grammar::GrammarCompiler& compiler,
                             GenerationRequest& generation) {
  const ToolGrammar tools = tool_grammar_mode(work);
  const std::optional<StructuredOutput>& structured = work.structured_output;
  if (tools != ToolGrammar::kNone && structured)
    throw invalid_field(structured->param, structured->param + " cannot be combined with tool_choice \"" +
                                               work.tool_choice +
                                               "\" or strict tools: give either a structured-output "
                                               "constraint or tool calls under a grammar");
  if (tools == ToolGrammar::kNone && !structured) return;

  grammar::Grammar grammar;
  std::string key;
  const std::string param = constraint_param(work);
  bool after_reasoning = false;
  if (tools != ToolGrammar::kNone) {
    std::tie(grammar, key) = tool_call_grammar(work, tools);
    after_reasoning = work.parse_reasoning;
  } else {
    const Kind kind = structured->constraint.kind;
    after_reasoning = work.parse_reasoning && (kind == Kind::kJsonSchema || kind == Kind::kJsonObject);
    if (!after_reasoning) {
      try {
        generation.constraint = compiler.compile(structured->constraint);
      } catch (const Error& e) {
        throw invalid_field(param, param + ": " + e.what());
      }
      return;
    }
    try {
      grammar = grammar::build_grammar(structured->constraint);
    } catch (const Error& e) {
      throw invalid_field(param, param + ": " + e.what());
    }
    key = structured->constraint.canonical_key();
  }

  grammar::ConstraintScope& scope = generation.constraint_scope;
  if (tools == ToolGrammar::kTriggered) {
    const std::optional<int32_t> open = tokenizer.token_id("<tool_call>");
    if (!open)
      throw invalid_field("tools", "strict tools need the tokenizer's <tool_call> token, which this model lacks");
    scope.triggers = {*open};
  }
  if (after_reasoning) {
    const std::optional<int32_t> open = tokenizer.token_id("<think>"), close = tokenizer.token_id("</think>");
    if (open && close) {
      scope.span_open = *open;
      scope.span_close = *close;
      scope.starts_in_span = work.prompt_opens_reasoning;
      // The template writes "</think>\n\n" before the answer.
      if (tools != ToolGrammar::kTriggered) {
        grammar = grammar::with_leading_whitespace(std::move(grammar));
        key += "\nafter-reasoning";
      }
    }
  }
  try {
    generation.constraint = compiler.compile(key, grammar);
  } catch (const Error& e) {
    throw invalid_field(param, param + ": " + e.what());
  }
}

std::string constraint_param(const CompletionWork& work) {
  return work.structured_output ? work.structured_output->param : "tools";
}

}  // namespace qinfer::server
