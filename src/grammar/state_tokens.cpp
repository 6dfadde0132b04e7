#include "grammar/state_tokens.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "grammar/parse_state.h"

namespace qinfer::grammar {
namespace {

// The parse after each prefix length of the token being walked, from the general parser: stacks that may grow into
// the rules the state calls.
class StackLevels {
 public:
  // The state's own stack, not expanded: what the state calls is the split of the matcher's other stacks.
  StackLevels(const Automaton& automaton, int32_t state, size_t max_len) : parser_(automaton), levels_(max_len + 1) {
    levels_[0].add(std::vector<int32_t>{kBottom, state});
  }
  // levels[depth + 1] from levels[depth] and `byte`.
  void step(size_t depth, unsigned char byte) { parser_.step(levels_[depth], byte, levels_[depth + 1]); }
  bool can_consume(size_t depth) const { return levels_[depth].size() > 0; }
  bool complete(size_t depth) const { return levels_[depth].complete; }

 private:
  Parser parser_;
  std::vector<StackSet> levels_;
};

// The same for a state whose reachable automaton calls no rule: the parse is one state (a table step per byte) and
// completes wherever that state is accepting.
class LeafLevels {
 public:
  LeafLevels(const Automaton& automaton, int32_t state, size_t max_len) : a_(automaton), states_(max_len + 1, -1) {
    states_[0] = state;
  }
  void step(size_t depth, unsigned char byte) { states_[depth + 1] = a_.step(states_[depth], byte); }
  bool can_consume(size_t depth) const {
    return states_[depth] >= 0 && a_.consumes[static_cast<size_t>(states_[depth])];
  }
  bool complete(size_t depth) const { return states_[depth] >= 0 && a_.accepting[static_cast<size_t>(states_[depth])]; }

 private:
  const Automaton& a_;
  std::vector<int32_t> states_;
};

// Walks the vocabulary in byte order, reusing the steps of the prefix shared with the previous token; a rejected
// token whose walk saw the rule complete nowhere rejects its whole trie subtree, which is skipped.
// A walk's result: accepted ids, and (remainder, id) for the uncertain tokens, views into the trie's bytes.
struct Walk {
  std::vector<int32_t> accepted;
  std::vector<std::pair<std::string_view, int32_t>> uncertain;
};

template <class Levels>
void walk_trie(const TokenTrie& trie, size_t max_len, Levels& levels, Walk& out) {
  // completed_by[d]: the rule completed after some prefix of 1..d bytes of the current token.
  std::vector<uint8_t> completed_by(max_len + 1, 0);
  size_t valid = 0;  // levels 0..valid hold the previous token's prefix
  for (size_t i = 0; i < trie.size(); ++i) {
    const std::string_view bytes = trie.bytes(i);
    size_t depth = std::min<size_t>(trie.lcp(i), valid);
    // Extend while something can still consume.
    while (depth < bytes.size() && levels.can_consume(depth)) {
      levels.step(depth, static_cast<unsigned char>(bytes[depth]));
      ++depth;
      completed_by[depth] = completed_by[depth - 1] || levels.complete(depth);
    }
    valid = depth;
    if (depth == bytes.size() && (levels.can_consume(depth) || levels.complete(depth))) {
      out.accepted.push_back(trie.id(i));
      continue;
    }
    if (!completed_by[depth]) {
      i = trie.subtree_end(i) - 1;
      continue;
    }
    // The rule completed after d < size bytes (d >= 1: the first byte is always the state's own) for some d <= depth.
    for (size_t d = 1; d <= depth && d < bytes.size(); ++d)
      if (levels.complete(d)) out.uncertain.emplace_back(bytes.substr(d), trie.id(i));
  }
}

void walk_state(const Automaton& automaton, const TokenVocabulary& vocab, int32_t state, const TokenTrie& trie,
                Walk& out) {
  const size_t max_len = vocab.max_token_length();
  if (automaton.call_free[static_cast<size_t>(state)]) {
    LeafLevels levels(automaton, state, max_len);
    walk_trie(trie, max_len, levels, out);
  } else {
    StackLevels levels(automaton, state, max_len);
    walk_trie(trie, max_len, levels, out);
  }
}

// The split of a walk, with the tokens of `base` (a split of other tokens) added.
StateTokens to_state_tokens(Walk& walk, const TokenVocabulary& vocab, const StateTokens* base) {
  StateTokens out;
  std::vector<int32_t>& accepted = walk.accepted;
  std::vector<std::pair<std::string_view, int32_t>>& uncertain = walk.uncertain;
  out.num_accepted = accepted.size() + (base ? base->num_accepted : 0);
  if (out.num_accepted * 32 > static_cast<size_t>(vocab.size())) {
    if (base && !base->accepted_mask.empty()) {
      out.accepted_mask = base->accepted_mask;
    } else {
      out.accepted_mask.assign(static_cast<size_t>(vocab.mask_words()), 0);
      if (base) accepted.insert(accepted.end(), base->accepted_ids.begin(), base->accepted_ids.end());
    }
    for (int32_t id : accepted) out.accepted_mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  } else {
    if (base) accepted.insert(accepted.end(), base->accepted_ids.begin(), base->accepted_ids.end());
    std::sort(accepted.begin(), accepted.end());
    out.accepted_ids = std::move(accepted);
  }
  if (base)
    for (size_t r = 0; r < base->remainders.size(); ++r)
      for (uint32_t t = base->remainder_begin[r]; t < base->remainder_begin[r + 1]; ++t)
        uncertain.emplace_back(base->remainders[r], base->remainder_tokens[t]);
  std::sort(uncertain.begin(), uncertain.end());
  std::vector<uint8_t> counted(static_cast<size_t>(vocab.size()), 0);
  for (size_t i = 0; i < uncertain.size(); ++i) {
    const auto& [remainder, id] = uncertain[i];
    if (i == 0 || remainder != uncertain[i - 1].first) {
      uint32_t shared = 0;
      if (!out.remainders.empty()) {
        const std::string& prev = out.remainders.back();
        while (shared < prev.size() && shared < remainder.size() && prev[shared] == remainder[shared]) ++shared;
      }
      out.remainder_lcp.push_back(shared);
      out.remainder_begin.push_back(static_cast<uint32_t>(out.remainder_tokens.size()));
      out.remainders.emplace_back(remainder);
    }
    out.remainder_tokens.push_back(id);
    if (!counted[static_cast<size_t>(id)]) counted[static_cast<size_t>(id)] = 1, ++out.num_uncertain;
  }
  out.remainder_begin.push_back(static_cast<uint32_t>(out.remainder_tokens.size()));
  return out;
}

}  // namespace

StateTokens compute_state_tokens(const Automaton& automaton, const TokenVocabulary& vocab, int32_t state,
                                 TokenLengths lengths) {
  Walk walk;
  walk_state(automaton, vocab, state, vocab.short_tokens(), walk);
  if (lengths == TokenLengths::kAll) walk_state(automaton, vocab, state, vocab.long_tokens(), walk);
  return to_state_tokens(walk, vocab, nullptr);
}

StateTokens add_long_tokens(const StateTokens& short_split, const Automaton& automaton, const TokenVocabulary& vocab,
                            int32_t state) {
  Walk walk;
  walk_state(automaton, vocab, state, vocab.long_tokens(), walk);
  return to_state_tokens(walk, vocab, &short_split);
}

}  // namespace qinfer::grammar
