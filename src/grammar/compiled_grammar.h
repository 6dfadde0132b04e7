// A constraint compiled once for a vocabulary: its automaton plus, per consuming state, the split of the vocabulary
// into tokens accepted and rejected whatever the stack below, and the uncertain rest (state_tokens.h). The splits are
// computed on first use (or all at once by precompute()) and shared by every matcher of the grammar, on any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/rule_automaton.h"
#include "grammar/state_tokens.h"
#include "grammar/token_vocabulary.h"

namespace qinfer::grammar {

// Token splits shared between grammars: a state whose rule calls nothing has a split that depends only on the
// automaton reachable from it, so grammars that contain the same leaf rule (every JSON string's characters, numbers)
// compute its split once. Keyed by a canonical description of that reachable automaton. Thread-safe.
class SharedStateTokens {
 public:
  std::shared_ptr<const StateTokens> find(const std::string& key) const;
  std::shared_ptr<const StateTokens> insert(const std::string& key, std::shared_ptr<const StateTokens> tokens);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const StateTokens>> tokens_;
};

class CompiledGrammar {
 public:
  CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenVocabulary> vocab,
                  std::shared_ptr<SharedStateTokens> shared = nullptr);
  const Automaton& automaton() const { return automaton_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  // Thread-safe; computes the state's split the first time.
  const StateTokens& state_tokens(int32_t state) const;
  // Computes the split of every consuming state now.
  void precompute() const;

 private:
  Automaton automaton_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  // The short tokens' split of a call-free state, shared by the states of this automaton that look the same within
  // TokenVocabulary::kShortTokenBytes bytes (the positions of a string with maxLength, far from its end).
  const StateTokens& short_split(int32_t state) const;

  std::shared_ptr<SharedStateTokens> shared_;
  mutable std::mutex mutex_;  // guards owned_ and short_splits_
  mutable std::vector<std::shared_ptr<const StateTokens>> owned_;
  mutable std::unordered_map<std::string, std::shared_ptr<const StateTokens>> short_splits_;
  std::unique_ptr<std::atomic<const StateTokens*>[]> tokens_;  // [num_states], null until computed
};

}  // namespace qinfer::grammar
