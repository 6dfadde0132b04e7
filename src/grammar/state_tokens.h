// xgrammar's split of the vocabulary, per automaton state: walking every token's bytes from a stack that holds only
// that state (the rule it belongs to, with nothing known below it) sorts each token into
//   accepted   - its bytes stay inside the rule (and what the rule calls): allowed whatever the stack below is;
//   rejected   - it fails before the rule could complete: never allowed;
//   uncertain  - the rule completes inside it and the rest of its bytes depend on the stack below.
// The uncertain tokens are kept as the distinct byte strings left after the rule completes (many tokens share them,
// e.g. `",` after a string), so that the matcher checks each remainder once against the real stack.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/rule_automaton.h"
#include "grammar/token_vocabulary.h"

namespace qinfer::grammar {

struct StateTokens {
  // Accepted tokens: a bitmask over the vocabulary when dense, else a sorted id list.
  std::vector<uint32_t> accepted_mask;  // [mask_words] or empty
  std::vector<int32_t> accepted_ids;
  // Uncertain tokens by remainder: remainders sorted, remainder_lcp[i] shared with remainder i - 1, and the tokens
  // of remainder i are remainder_tokens[remainder_begin[i], remainder_begin[i + 1]).
  std::vector<std::string> remainders;
  std::vector<uint32_t> remainder_lcp;
  std::vector<uint32_t> remainder_begin;
  std::vector<int32_t> remainder_tokens;
  size_t num_accepted = 0, num_uncertain = 0;
};

// Which tokens of the vocabulary a split covers: all, or those of at most TokenVocabulary::kShortTokenBytes bytes.
enum class TokenLengths { kAll, kShort };

// Classifies the vocabulary's tokens for `state` (a consuming state of `automaton`).
StateTokens compute_state_tokens(const Automaton& automaton, const TokenVocabulary& vocab, int32_t state,
                                 TokenLengths lengths = TokenLengths::kAll);

// The split of every token for `state`: `short_split` (the short tokens' split of a state whose automaton within
// kShortTokenBytes bytes is the same as `state`'s) with `state`'s walk of the long tokens added.
StateTokens add_long_tokens(const StateTokens& short_split, const Automaton& automaton, const TokenVocabulary& vocab,
                            int32_t state);

}  // namespace qinfer::grammar
