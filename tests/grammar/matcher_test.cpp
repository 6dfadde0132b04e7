#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/state_tokens.h"
#include "grammar_test_util.h"

namespace qinfer::grammar {
namespace {

using testing::allowed_ids;
using testing::brute_force_mask;
using testing::fast_mask;

// Pieces like a BPE vocabulary's: multi-byte runs, punctuation mixed with letters, and pieces that split UTF-8
// characters ("\xC3" and "\xA9" together make "é").
std::vector<std::string> pieces() {
  std::vector<std::string> p = {"{",      "}",  "\"",  "\":",  "\": ",    "\",",      "\", \"", ", ",   ",",
                                ":",      " ",  "[",   "]",    "a",       "b",        "ab",     "abc",  "name",
                                "\"name", "1",  "12",  "0",    "-",       ".",        "e",      "true", "false",
                                "null",   "nu", "ll",  "\xC3", "\xA9",    "\xC3\xA9", "\\",     "\\n",  "n",
                                "\"}",    "}]", "\"]", "x\"",  "\"a\": ", "\xE4\xB8", "\xAD"};
  // Longer than TokenVocabulary::kShortTokenBytes: walked apart from the short tokens.
  for (const char* piece :
       {"abababababababababab", "abababababababababab\"", "\", \"name\": \"abcdefghijk", "                  "})
    p.emplace_back(piece);
  for (int b = 0x20; b < 0x7F; ++b) p.emplace_back(1, static_cast<char>(b));
  return p;
}

// Walks random allowed tokens, checking at every step that the cached mask equals the brute-force one, until the
// stop id is drawn; returns the text produced.
std::string random_walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int max_steps) {
  GrammarMatcher m(g);
  std::mt19937 rng(seed);
  std::string text;
  for (int step = 0; step < max_steps; ++step) {
    const std::vector<uint32_t> fast = fast_mask(m);
    EXPECT_EQ(allowed_ids(fast), allowed_ids(brute_force_mask(m))) << "after '" << text << "'";
    const std::vector<int32_t> ids = allowed_ids(fast);
    if (ids.empty()) {
      ADD_FAILURE() << "no token allowed after '" << text << "'";
      break;
    }
    // Prefer continuing for a while so walks get deep.
    int32_t id = ids[rng() % ids.size()];
    const bool can_stop = m.is_complete();
    if (can_stop && step > 20) id = g->vocab().stop_ids()[0];
    if (!g->vocab().is_stop(id)) text += g->vocab().bytes(id);
    EXPECT_TRUE(m.accept_token(id));
    if (m.is_terminated()) break;
  }
  return text;
}

TEST(Matcher, CachedMaskEqualsBruteForceOnJsonSchema) {
  auto vocab = testing::make_vocab(pieces());
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
      "n": {"type": "integer", "minimum": -5, "maximum": 120}, "ok": {"type": ["boolean", "null"]}},
      "required": ["name", "n"]})");
  auto g = testing::compile(json_schema_grammar(schema), vocab);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::string text = random_walk(g, seed, 80);
    if (!text.empty() && text.back() == '}') {
      EXPECT_TRUE(nlohmann::json::accept(text)) << text;
    }
  }
}

TEST(Matcher, CachedMaskEqualsBruteForceOnRecursiveGrammar) {
  auto vocab = testing::make_vocab(pieces());
  auto g = testing::compile(parse_gbnf(R"(root ::= value
value ::= "[" (value (", " value)*)? "]" | [a-z]+ | "\"" ([^"\\] | "\\n")* "\""
)"),
                            vocab);
  for (uint32_t seed = 0; seed < 20; ++seed) random_walk(g, seed, 60);
}

TEST(Matcher, StopOnlyWhereComplete) {
  auto vocab = testing::make_vocab(pieces());
  const int32_t stop = vocab->stop_ids()[0];
  GrammarMatcher m(testing::compile(parse_gbnf("root ::= \"ab\" \"c\"?"), vocab));
  EXPECT_FALSE(m.accept_token(stop));
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.is_complete());
  const std::vector<int32_t> ids = allowed_ids(fast_mask(m));
  EXPECT_EQ(ids.size(), 2u);  // "c" and the stop id
  EXPECT_TRUE(m.accept_token(stop));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_bytes("c"));
}

TEST(Matcher, TokensSplittingUtf8Characters) {
  auto vocab = testing::make_vocab(pieces());
  GrammarMatcher m(testing::compile(parse_gbnf("root ::= [\\u00e0-\\u00ff]+ \"!\""), vocab));
  std::vector<int32_t> ids = allowed_ids(fast_mask(m));
  std::vector<std::string> allowed;
  for (int32_t id : ids) allowed.emplace_back(vocab->bytes(id));
  EXPECT_EQ(allowed, (std::vector<std::string>{"\xC3", "\xC3\xA9"}));
  ASSERT_TRUE(m.accept_bytes("\xC3"));
  allowed.clear();
  for (int32_t id : allowed_ids(fast_mask(m))) allowed.emplace_back(vocab->bytes(id));
  EXPECT_EQ(allowed, (std::vector<std::string>{"\xA9", "\xAD"}));  // continuation bytes in A0-BF
  EXPECT_FALSE(m.accept_bytes("!"));                               // inside a character
  EXPECT_TRUE(m.accept_bytes("\xA9!"));
  EXPECT_TRUE(m.is_complete());
}

TEST(Matcher, RejectedTokenLeavesStateUnchanged) {
  auto vocab = testing::make_vocab(pieces());
  GrammarMatcher m(testing::compile(parse_gbnf("root ::= \"abc\""), vocab));
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_FALSE(m.accept_bytes("bx"));
  EXPECT_TRUE(m.accept_bytes("bc"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.must_stop());
}

TEST(TokenVocabulary, TriesHoldEveryTokenInByteOrderWithItsSubtree) {
  auto vocab = testing::make_vocab(pieces());
  size_t tokens = 0;
  for (const TokenTrie* trie : {&vocab->short_tokens(), &vocab->long_tokens()}) {
    ASSERT_GT(trie->size(), 0u);
    tokens += trie->size();
    for (size_t i = 0; i < trie->size(); ++i) {
      const std::string_view token = trie->bytes(i);
      EXPECT_EQ(token, vocab->bytes(trie->id(i)));
      EXPECT_EQ(token.size() <= TokenVocabulary::kShortTokenBytes, trie == &vocab->short_tokens());
      if (i > 0) {
        EXPECT_LE(trie->bytes(i - 1), token);
      }
      const size_t end = trie->subtree_end(i);
      ASSERT_GT(end, i);
      for (size_t j = i; j < end; ++j) EXPECT_TRUE(trie->bytes(j).starts_with(token)) << j << " under " << i;
      if (end < trie->size()) {
        EXPECT_FALSE(trie->bytes(end).starts_with(token)) << end << " after " << i;
      }
    }
  }
  EXPECT_EQ(tokens, static_cast<size_t>(vocab->size() - 1));  // all but the stop id
}

// Every token's bytes run from the state's own stack, byte by byte: accepted when it survives whole, uncertain with
// the remainder after each point where the rule completed (when not accepted), else rejected.
TEST(StateTokens, SplitEqualsAWalkOfEveryTokenOnItsOwn) {
  auto vocab = testing::make_vocab(pieces());
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "s": {"type": "string", "maxLength": 3}, "v": {}, "a": {"type": "array", "items": {"type": "number"}}},
      "required": ["s"]})");
  const Automaton a = build_automaton(json_schema_grammar(schema));
  Parser parser(a);
  for (int32_t state = 0; state < a.num_states(); ++state) {
    if (!a.consumes[static_cast<size_t>(state)]) continue;
    const StateTokens split = compute_state_tokens(a, *vocab, state);
    std::vector<int32_t> accepted;
    std::set<std::pair<std::string, int32_t>> uncertain, split_uncertain;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const std::string_view bytes = vocab->bytes(id);
      if (vocab->is_stop(id)) continue;
      StackSet cur, next;
      cur.add(std::vector<int32_t>{kBottom, state});
      std::vector<std::string> remainders;
      size_t d = 0;
      for (; d < bytes.size() && cur.size() > 0; ++d) {
        parser.step(cur, static_cast<unsigned char>(bytes[d]), next);
        std::swap(cur, next);
        if (cur.complete && d + 1 < bytes.size()) remainders.emplace_back(bytes.substr(d + 1));
      }
      if (d == bytes.size() && !cur.dead()) {
        accepted.push_back(id);
      } else {
        for (const std::string& r : remainders) uncertain.emplace(r, id);
      }
    }
    std::sort(accepted.begin(), accepted.end());
    std::vector<int32_t> split_accepted = split.accepted_ids;
    for (int32_t id = 0; id < vocab->size() && !split.accepted_mask.empty(); ++id)
      if (split.accepted_mask[static_cast<size_t>(id) / 32] >> (id % 32) & 1u) split_accepted.push_back(id);
    EXPECT_EQ(split_accepted, accepted) << "state " << state;
    for (size_t r = 0; r < split.remainders.size(); ++r)
      for (uint32_t t = split.remainder_begin[r]; t < split.remainder_begin[r + 1]; ++t)
        split_uncertain.emplace(split.remainders[r], split.remainder_tokens[t]);
    EXPECT_EQ(split_uncertain, uncertain) << "state " << state;
  }
}

// The states of a long bounded string share the short tokens' split while they look alike within
// kShortTokenBytes bytes; each state's split, long tokens added, equals its own walk of the whole vocabulary.
TEST(StateTokens, SplitsSharedBetweenLookalikeStatesEqualTheirOwnWalk) {
  auto vocab = testing::make_vocab(pieces());
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "string", "maxLength": 40})");
  const auto g = testing::compile(json_schema_grammar(schema), vocab);
  const Automaton& a = g->automaton();
  for (int32_t state = 0; state < a.num_states(); ++state) {
    if (!a.consumes[static_cast<size_t>(state)]) continue;
    const StateTokens& shared = g->state_tokens(state);
    const StateTokens own = compute_state_tokens(a, *vocab, state);
    EXPECT_EQ(shared.accepted_mask, own.accepted_mask) << "state " << state;
    EXPECT_EQ(shared.accepted_ids, own.accepted_ids) << "state " << state;
    EXPECT_EQ(shared.remainders, own.remainders) << "state " << state;
    EXPECT_EQ(shared.remainder_begin, own.remainder_begin) << "state " << state;
    EXPECT_EQ(shared.remainder_tokens, own.remainder_tokens) << "state " << state;
  }
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("\"" + std::string(39, 'x')));
  EXPECT_EQ(allowed_ids(fast_mask(m)), allowed_ids(brute_force_mask(m)));
}

}  // namespace
}  // namespace qinfer::grammar
