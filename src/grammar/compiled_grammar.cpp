#include "grammar/compiled_grammar.h"

namespace qinfer::grammar {

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenVocabulary> vocab)
    : automaton_(std::move(automaton)),
      vocab_(std::move(vocab)),
      tokens_(new std::atomic<const StateTokens*>[static_cast<size_t>(automaton_.num_states())]) {
  for (int32_t s = 0; s < automaton_.num_states(); ++s) tokens_[static_cast<size_t>(s)].store(nullptr);
}

const StateTokens& CompiledGrammar::state_tokens(int32_t state) const {
  std::atomic<const StateTokens*>& slot = tokens_[static_cast<size_t>(state)];
  if (const StateTokens* ready = slot.load(std::memory_order_acquire)) return *ready;
  // Computed outside the lock: two threads may both compute a state once; the first one stored wins.
  auto computed = std::make_unique<const StateTokens>(compute_state_tokens(automaton_, *vocab_, state));
  std::lock_guard lock(mutex_);
  if (const StateTokens* ready = slot.load(std::memory_order_acquire)) return *ready;
  slot.store(computed.get(), std::memory_order_release);
  owned_.push_back(std::move(computed));
  return *owned_.back();
}

void CompiledGrammar::precompute() const {
  for (int32_t s = 0; s < automaton_.num_states(); ++s)
    if (automaton_.consumes[static_cast<size_t>(s)]) state_tokens(s);
}

}  // namespace qinfer::grammar
