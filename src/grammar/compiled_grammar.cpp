#include "grammar/compiled_grammar.h"

namespace qinfer::grammar {
namespace {

// Larger reachable automata (a string of bounded length, thousands of states) belong to one schema: describing them
// would cost as much as the split they could share.
constexpr size_t kMaxSharedStates = 256;

// The automaton reachable from `state` through bytes, states numbered in discovery order: per state its accepting
// flag and its transitions as byte runs. Empty when a reachable state calls a rule (its split then depends on it) or
// more than kMaxSharedStates states are reachable.
std::string leaf_signature(const Automaton& a, int32_t state) {
  std::vector<int32_t> order{state};
  std::unordered_map<int32_t, int32_t> number{{state, 0}};
  std::string key;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t s = order[i];
    if (a.call_begin[static_cast<size_t>(s)] != a.call_begin[static_cast<size_t>(s) + 1]) return {};
    key += a.accepting[static_cast<size_t>(s)] ? 'A' : 'N';
    int32_t run_target = -2;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = a.step(s, static_cast<unsigned char>(b));
      int32_t canonical = -1;
      if (t >= 0) {
        auto [it, inserted] = number.try_emplace(t, static_cast<int32_t>(order.size()));
        if (inserted) order.push_back(t);
        if (order.size() > kMaxSharedStates) return {};
        canonical = it->second;
      }
      if (canonical != run_target) {
        key += std::to_string(b) + ">" + std::to_string(canonical) + ",";
        run_target = canonical;
      }
    }
    key += ';';
  }
  return key;
}

// The automaton within `depth` bytes of `state`, states numbered in breadth-first order: per state its flags and,
// for the states less than `depth` bytes away, its transitions by byte class. States of one automaton with the same
// description give every token of at most `depth` bytes the same split (the walk of such a token sees nothing else).
std::string bounded_signature(const Automaton& a, int32_t state, size_t depth) {
  const size_t classes = static_cast<size_t>(a.num_classes);
  std::vector<int32_t> order{state};
  std::vector<uint32_t> distance{0};
  std::unordered_map<int32_t, int32_t> number{{state, 0}};
  std::string key;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t s = static_cast<size_t>(order[i]);
    key += static_cast<char>('0' + a.consumes[s] + 2 * a.accepting[s]);
    if (distance[i] < depth) {
      for (size_t c = 0; c < classes; ++c) {
        const int32_t t = a.next[s * classes + c];
        int32_t canonical = -1;
        if (t >= 0) {
          auto [it, inserted] = number.try_emplace(t, static_cast<int32_t>(order.size()));
          if (inserted) order.push_back(t), distance.push_back(distance[i] + 1);
          canonical = it->second;
        }
        key.append(reinterpret_cast<const char*>(&canonical), sizeof canonical);
      }
    }
    key += ';';
  }
  return key;
}

}  // namespace

std::shared_ptr<const StateTokens> SharedStateTokens::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(key);
  return it == tokens_.end() ? nullptr : it->second;
}

std::shared_ptr<const StateTokens> SharedStateTokens::insert(const std::string& key,
                                                             std::shared_ptr<const StateTokens> tokens) {
  std::lock_guard lock(mutex_);
  return tokens_.try_emplace(key, std::move(tokens)).first->second;
}

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenVocabulary> vocab,
                                 std::shared_ptr<SharedStateTokens> shared)
    : automaton_(std::move(automaton)),
      vocab_(std::move(vocab)),
      shared_(std::move(shared)),
      tokens_(new std::atomic<const StateTokens*>[static_cast<size_t>(automaton_.num_states())]) {
  for (int32_t s = 0; s < automaton_.num_states(); ++s) tokens_[static_cast<size_t>(s)].store(nullptr);
}

const StateTokens& CompiledGrammar::state_tokens(int32_t state) const {
  std::atomic<const StateTokens*>& slot = tokens_[static_cast<size_t>(state)];
  if (const StateTokens* ready = slot.load(std::memory_order_acquire)) return *ready;
  // Computed outside the lock: two threads may both compute a state once; the first one stored wins.
  const bool call_free = automaton_.call_free[static_cast<size_t>(state)];
  const std::string key = shared_ && call_free ? leaf_signature(automaton_, state) : std::string();
  std::shared_ptr<const StateTokens> computed = key.empty() ? nullptr : shared_->find(key);
  if (!computed && key.empty() && call_free) {
    computed = std::make_shared<const StateTokens>(add_long_tokens(short_split(state), automaton_, *vocab_, state));
  } else if (!computed) {
    computed = std::make_shared<const StateTokens>(compute_state_tokens(automaton_, *vocab_, state));
    if (!key.empty()) computed = shared_->insert(key, std::move(computed));
  }
  std::lock_guard lock(mutex_);
  if (const StateTokens* ready = slot.load(std::memory_order_acquire)) return *ready;
  slot.store(computed.get(), std::memory_order_release);
  owned_.push_back(std::move(computed));
  return *owned_.back();
}

const StateTokens& CompiledGrammar::short_split(int32_t state) const {
  const std::string key = bounded_signature(automaton_, state, TokenVocabulary::kShortTokenBytes);
  {
    std::lock_guard lock(mutex_);
    if (auto it = short_splits_.find(key); it != short_splits_.end()) return *it->second;
  }
  auto computed =
      std::make_shared<const StateTokens>(compute_state_tokens(automaton_, *vocab_, state, TokenLengths::kShort));
  std::lock_guard lock(mutex_);
  return *short_splits_.try_emplace(key, std::move(computed)).first->second;
}

void CompiledGrammar::precompute() const {
  for (int32_t s = 0; s < automaton_.num_states(); ++s)
    if (automaton_.consumes[static_cast<size_t>(s)]) state_tokens(s);
}

}  // namespace qinfer::grammar
