// Helpers of the grammar tests: small vocabularies, compiling a constraint, the brute-force mask (every token tried
// on a copy of the matcher) that the cached mask must equal, and walking a text through a matcher.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "grammar/rule_automaton.h"

namespace qinfer::grammar::testing {

// Vocabulary of the given pieces; the id after the last piece is the stop id.
inline std::shared_ptr<const TokenVocabulary> make_vocab(std::vector<std::string> pieces) {
  const int32_t stop = static_cast<int32_t>(pieces.size());
  pieces.emplace_back();
  return std::make_shared<const TokenVocabulary>(std::move(pieces), std::vector<int32_t>{stop});
}

// Every single byte as a token, plus a stop id (256).
inline std::shared_ptr<const TokenVocabulary> byte_vocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  return make_vocab(std::move(pieces));
}

inline std::shared_ptr<const CompiledGrammar> compile(const Grammar& g, std::shared_ptr<const TokenVocabulary> vocab) {
  return std::make_shared<const CompiledGrammar>(build_automaton(g), std::move(vocab));
}

// Whether the whole text is a complete sentence of the grammar.
inline bool matches(const std::shared_ptr<const CompiledGrammar>& compiled, const std::string& text) {
  GrammarMatcher m(compiled);
  return m.accept_bytes(text) && m.is_complete();
}

// Every token's bytes run from the matcher's stacks on their own (no token splits, no caches).
inline std::vector<uint32_t> brute_force_mask(const GrammarMatcher& matcher) {
  const TokenVocabulary& vocab = matcher.grammar().vocab();
  std::vector<uint32_t> mask(static_cast<size_t>(vocab.mask_words()), 0);
  Parser parser(matcher.grammar().automaton());
  StackSet a, b;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string_view bytes = vocab.bytes(id);
    bool allowed;
    if (vocab.is_stop(id))
      allowed = matcher.stacks().complete && !matcher.is_terminated();
    else
      allowed =
          !bytes.empty() && !matcher.is_terminated() &&
          !parser.run(matcher.stacks(), {reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, a, b)
               .dead();
    if (allowed) mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  }
  return mask;
}

inline std::vector<uint32_t> fast_mask(GrammarMatcher& matcher) {
  std::vector<uint32_t> mask(static_cast<size_t>(matcher.grammar().vocab().mask_words()));
  matcher.fill_mask(mask);
  return mask;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < mask.size() * 32; ++i)
    if (mask[i / 32] >> (i % 32) & 1u) ids.push_back(static_cast<int32_t>(i));
  return ids;
}

}  // namespace qinfer::grammar::testing
