// The scoped matcher (free text around a constraint: a reasoning span first, or a trigger token that starts the
// grammar) and the Hermes/Qwen3 tool-call grammar.
#include "grammar/scoped_matcher.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/tool_call_grammar.h"
#include "grammar_test_util.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

using testing::allowed_ids;

// Printable bytes and "\n" as tokens, the tags as single tokens (as Qwen3's added tokens), a word, then the stop id.
struct TagVocab {
  std::shared_ptr<const TokenVocabulary> vocab;
  int32_t tool_open, tool_close, think_open, think_close, hello, stop;
};

TagVocab tag_vocab() {
  std::vector<std::string> pieces;
  for (int b = 0x20; b < 0x7F; ++b) pieces.emplace_back(1, static_cast<char>(b));
  pieces.emplace_back("\n");
  TagVocab v{};
  const auto add = [&](const std::string& piece) {
    pieces.push_back(piece);
    return static_cast<int32_t>(pieces.size() - 1);
  };
  v.tool_open = add("<tool_call>");
  v.tool_close = add("</tool_call>");
  v.think_open = add("<think>");
  v.think_close = add("</think>");
  v.hello = add("hello");
  v.stop = static_cast<int32_t>(pieces.size());
  v.vocab = testing::make_vocab(std::move(pieces));
  return v;
}

std::vector<int32_t> mask_of(ScopedMatcher& m) {
  std::vector<uint32_t> mask(static_cast<size_t>(m.grammar().vocab().mask_words()), 0xA5A5A5A5u);
  m.fill_mask(mask);
  return allowed_ids(mask);
}

bool allows(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// Feeds text one byte token at a time (every printable byte and "\n" is a token of tag_vocab).
bool accept_text(ScopedMatcher& m, const TagVocab& v, const std::string& text) {
  for (char c : text) {
    const int32_t id = c == '\n' ? 0x7F - 0x20 : c - 0x20;
    if (v.vocab->bytes(id) != std::string(1, c) || !m.accept_token(id)) return false;
  }
  return true;
}

const nlohmann::ordered_json kDigitSchema = nlohmann::ordered_json::parse(
    R"({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x"]})");

TEST(ScopedMatcher, TriggerStartsTheGrammarAndItsEndFreesTheOutputAgain) {
  const TagVocab v = tag_vocab();
  ToolCallGrammarBuilder builder;
  builder.add_function("get", kDigitSchema);
  const auto g = testing::compile(std::move(builder).call_after_open_tag(), v.vocab);
  ScopedMatcher m(g, ConstraintScope{.triggers = {v.tool_open}});
  // Free text: every id, the stop id too.
  EXPECT_EQ(mask_of(m).size(), static_cast<size_t>(v.vocab->size()));
  EXPECT_FALSE(m.in_grammar());
  EXPECT_TRUE(m.accept_token(v.hello));
  EXPECT_TRUE(m.accept_token(v.tool_open));
  EXPECT_TRUE(m.in_grammar());
  std::vector<int32_t> ids = mask_of(m);
  EXPECT_EQ(ids, std::vector<int32_t>{0x7F - 0x20});  // only "\n"
  EXPECT_FALSE(m.accept_token(v.hello));
  ASSERT_TRUE(accept_text(m, v, "\n{\"name\": \"get\", \"arguments\": {\"x\": 7"));
  ids = mask_of(m);
  EXPECT_FALSE(allows(ids, v.stop));  // the call is not finished
  EXPECT_FALSE(allows(ids, '8' - 0x20));
  ASSERT_TRUE(accept_text(m, v, "}}\n"));
  EXPECT_TRUE(m.accept_token(v.tool_close));
  EXPECT_FALSE(m.in_grammar());
  EXPECT_EQ(mask_of(m).size(), static_cast<size_t>(v.vocab->size()));
  // A second call is constrained the same way.
  EXPECT_TRUE(m.accept_token(v.tool_open));
  EXPECT_TRUE(m.in_grammar());
  EXPECT_FALSE(accept_text(m, v, "\n{\"name\": \"put\""));
}

// The closing tag inside an argument's JSON string is string content: the call goes on until the real closing tag.
TEST(ScopedMatcher, ClosingTagInsideAnArgumentStringDoesNotEndTheCall) {
  const TagVocab v = tag_vocab();
  ToolCallGrammarBuilder builder;
  builder.add_function("echo",
                       nlohmann::ordered_json::parse(
                           R"({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})"));
  const auto g = testing::compile(std::move(builder).call_after_open_tag(), v.vocab);
  ScopedMatcher m(g, ConstraintScope{.triggers = {v.tool_open}});
  ASSERT_TRUE(m.accept_token(v.tool_open));
  ASSERT_TRUE(accept_text(m, v, "\n{\"name\": \"echo\", \"arguments\": {\"text\": \"a"));
  EXPECT_TRUE(allows(mask_of(m), v.tool_close));
  ASSERT_TRUE(m.accept_token(v.tool_close));
  EXPECT_TRUE(m.in_grammar());
  EXPECT_FALSE(allows(mask_of(m), v.stop));
  ASSERT_TRUE(accept_text(m, v, "\"}}\n"));
  ASSERT_TRUE(m.accept_token(v.tool_close));
  EXPECT_FALSE(m.in_grammar());
}

// Random allowed tokens (words and tags preferred so that calls open often): every call the walk produces parses
// and has arguments that match the schema.
TEST(ScopedMatcher, RandomWalksUnderATriggeredToolGrammarOnlyProduceValidCalls) {
  const TagVocab v = tag_vocab();
  ToolCallGrammarBuilder builder;
  builder.add_function("get", kDigitSchema);
  builder.add_unchecked_function("any");
  const auto g = testing::compile(std::move(builder).call_after_open_tag(), v.vocab);
  int calls = 0;
  for (uint32_t seed = 0; seed < 30; ++seed) {
    ScopedMatcher m(g, ConstraintScope{.triggers = {v.tool_open}});
    std::mt19937 rng(seed);
    std::string text, call;  // call: what the grammar matched since the last trigger
    for (int step = 0; step < 400; ++step) {
      std::vector<int32_t> ids = mask_of(m);
      ids.erase(std::remove(ids.begin(), ids.end(), v.stop), ids.end());
      ASSERT_FALSE(ids.empty()) << text;
      int32_t id = ids[rng() % ids.size()];
      if (!m.in_grammar() && rng() % 4 == 0) id = v.tool_open;
      // Inside a call, close quickly: prefer the structural bytes.
      if (m.in_grammar() && rng() % 2 == 0)
        for (int32_t pick : ids)
          if (std::string("}\"0123456789").find(v.vocab->bytes(pick)[0]) != std::string::npos || pick == v.tool_close)
            id = pick;
      const bool was_in_grammar = m.in_grammar();
      ASSERT_TRUE(m.accept_token(id)) << text;
      text += v.vocab->bytes(id);
      if (was_in_grammar) call += v.vocab->bytes(id);
      if (was_in_grammar && !m.in_grammar()) {
        // The grammar ended: the call's body, then "\n</tool_call>".
        ASSERT_TRUE(call.ends_with("\n</tool_call>")) << call;
        const auto parsed = nlohmann::json::parse(call.substr(0, call.size() - 13));
        ASSERT_TRUE(parsed["name"] == "get" || parsed["name"] == "any") << parsed.dump();
        ASSERT_TRUE(parsed["arguments"].is_object());
        if (parsed["name"] == "get") {
          ASSERT_TRUE(parsed["arguments"]["x"].is_number_integer());
          EXPECT_EQ(parsed["arguments"].size(), 1u);
        }
        ++calls;
        call.clear();
      }
    }
  }
  EXPECT_GT(calls, 20);
}

TEST(ScopedMatcher, ReasoningSpanIsFreeAndTheGrammarFollowsIt) {
  const TagVocab v = tag_vocab();
  Grammar yes_no;
  yes_no.set_root(yes_no.add_rule("root", yes_no.choice({yes_no.literal("yes"), yes_no.literal("no")})));
  const auto g = testing::compile(with_leading_whitespace(std::move(yes_no)), v.vocab);
  const ConstraintScope scope{.span_open = v.think_open, .span_close = v.think_close, .triggers = {}};

  ScopedMatcher m(g, scope);
  std::vector<int32_t> ids = mask_of(m);
  EXPECT_TRUE(allows(ids, v.think_open));
  EXPECT_TRUE(allows(ids, 'y' - 0x20));
  EXPECT_FALSE(allows(ids, v.hello));
  EXPECT_FALSE(allows(ids, v.stop));
  ASSERT_TRUE(m.accept_token(v.think_open));
  EXPECT_FALSE(m.in_grammar());
  ids = mask_of(m);
  EXPECT_TRUE(allows(ids, v.hello));
  EXPECT_TRUE(allows(ids, v.tool_open));
  EXPECT_FALSE(allows(ids, v.stop));  // the answer must still come
  EXPECT_FALSE(m.accept_token(v.stop));
  ASSERT_TRUE(m.accept_token(v.hello));
  ASSERT_TRUE(m.accept_token(v.think_close));
  EXPECT_TRUE(m.in_grammar());
  EXPECT_FALSE(m.accept_token(v.hello));
  ASSERT_TRUE(accept_text(m, v, "\n\nno"));
  EXPECT_EQ(mask_of(m), std::vector<int32_t>{v.stop});
  EXPECT_TRUE(m.accept_token(v.stop));

  // Without the span the grammar applies from the first token.
  ScopedMatcher direct(g, scope);
  ASSERT_TRUE(accept_text(direct, v, "y"));
  EXPECT_TRUE(direct.in_grammar());
  EXPECT_FALSE(direct.accept_token(v.think_open));

  // The prompt opened the span: the output starts inside it.
  ScopedMatcher inside(
      g,
      ConstraintScope{.span_open = v.think_open, .span_close = v.think_close, .starts_in_span = true, .triggers = {}});
  EXPECT_TRUE(allows(mask_of(inside), v.hello));
  ASSERT_TRUE(inside.accept_token(v.think_close));
  EXPECT_TRUE(accept_text(inside, v, "yes"));
}

TEST(ToolCallGrammar, CallsInTheTemplateShapeOneOrSeveral) {
  const TagVocab v = tag_vocab();
  const auto build = [&](bool parallel) {
    ToolCallGrammarBuilder builder;
    builder.add_function("get", kDigitSchema);
    builder.add_function("say \"hi\"", nlohmann::ordered_json::parse(R"({"type": "object"})"));
    return testing::compile(std::move(builder).calls(parallel), v.vocab);
  };
  const std::string get = "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"x\": 3}}\n</tool_call>";
  const std::string hi = "<tool_call>\n{\"name\": \"say \\\"hi\\\"\", \"arguments\": {}}\n</tool_call>";
  const auto single = build(false), parallel = build(true);
  EXPECT_TRUE(testing::matches(single, get));
  EXPECT_TRUE(testing::matches(single, hi));
  EXPECT_FALSE(testing::matches(single, get + "\n" + hi));
  EXPECT_TRUE(testing::matches(parallel, get + "\n" + hi));
  EXPECT_FALSE(testing::matches(parallel, ""));
  EXPECT_FALSE(
      testing::matches(parallel, "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"x\": 12}}\n</tool_call>"));
  EXPECT_FALSE(testing::matches(parallel, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));

  ToolCallGrammarBuilder bad;
  try {
    bad.add_function("f", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"a": {"not": {}}}})"));
    FAIL() << "an unsupported keyword must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/properties/a"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qinfer::grammar
