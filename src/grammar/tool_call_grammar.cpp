#include "grammar/tool_call_grammar.h"

#include "grammar/json_schema.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

constexpr std::string_view kOpenLine = "<tool_call>\n";
constexpr std::string_view kCloseLine = "\n</tool_call>";
// Bounded, so that a model cannot spend its tokens on blanks.
constexpr int32_t kMaxLeadingSpace = 4;

}  // namespace

void ToolCallGrammarBuilder::add_function(const std::string& name, const nlohmann::ordered_json& parameters) {
  const std::string prefix = "fn" + std::to_string(alternatives_.size()) + "-";
  const int32_t arguments = add_json_schema(grammar_, parameters, prefix);
  // The same layout as every generated JSON text (json_layout): ", " between members, ": " after keys.
  const std::string head = "{\"name\": " + json_layout(nlohmann::ordered_json(name)) + ", \"arguments\": ";
  alternatives_.push_back(
      grammar_.sequence({grammar_.literal(head), grammar_.reference(arguments), grammar_.literal("}")}));
}

void ToolCallGrammarBuilder::add_unchecked_function(const std::string& name) {
  add_function(name, nlohmann::ordered_json{{"type", "object"}, {"additionalProperties", true}});
}

int32_t ToolCallGrammarBuilder::call_body() {
  if (alternatives_.empty()) throw Error(ErrorKind::kInvalidArgument, "a tool-call grammar needs a function");
  return grammar_.add_rule(grammar_.unique_name("call"), grammar_.choice(alternatives_));
}

Grammar ToolCallGrammarBuilder::calls(bool parallel) && {
  const int32_t body = call_body();
  const int32_t block = grammar_.add_rule(
      grammar_.unique_name("tool-call"),
      grammar_.sequence({grammar_.literal(kOpenLine), grammar_.reference(body), grammar_.literal(kCloseLine)}));
  const int32_t more = grammar_.star(grammar_.sequence({grammar_.literal("\n"), grammar_.reference(block)}));
  grammar_.set_root(
      grammar_.add_rule(grammar_.unique_name("root"),
                        parallel ? grammar_.sequence({grammar_.reference(block), more}) : grammar_.reference(block)));
  return std::move(grammar_);
}

Grammar ToolCallGrammarBuilder::call_after_open_tag() && {
  const int32_t body = call_body();
  grammar_.set_root(grammar_.add_rule(
      grammar_.unique_name("root"),
      grammar_.sequence({grammar_.literal("\n"), grammar_.reference(body), grammar_.literal(kCloseLine)})));
  return std::move(grammar_);
}

Grammar with_leading_whitespace(Grammar inner) {
  ByteSet space;
  space.set(' ');
  space.set('\n');
  const int32_t root = inner.root();
  inner.set_root(
      inner.add_rule(inner.unique_name("root-after-space"),
                     inner.sequence({inner.repeat(inner.bytes(space), 0, kMaxLeadingSpace), inner.reference(root)})));
  return inner;
}

}  // namespace qinfer::grammar
