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

// True when no state reachable from `state` through bytes calls a rule.
bool is_leaf(const Automaton& a, int32_t state) {
  std::vector<uint8_t> seen(static_cast<size_t>(a.num_states()), 0);
  std::vector<int32_t> todo{state};
  seen[static_cast<size_t>(state)] = 1;
  while (!todo.empty()) {
    const size_t s = static_cast<size_t>(todo.back());
    todo.pop_back();
    if (a.call_begin[s] != a.call_begin[s + 1]) return false;
    for (size_t c = 0; c < static_cast<size_t>(a.num_classes); ++c) {
      const int32_t t = a.next[s * static_cast<size_t>(a.num_classes) + c];
      if (t >= 0 && !seen[static_cast<size_t>(t)]) seen[static_cast<size_t>(t)] = 1, todo.push_back(t);
    }
  }
  return true;
}

// Walks the vocabulary in byte order, reusing the steps of the prefix shared with the previous token; a rejected
// token whose walk saw the rule complete nowhere rejects its whole trie subtree, which is skipped.
template <class Levels>
void walk_vocabulary(const TokenVocabulary& vocab, Levels& levels, std::vector<int32_t>& accepted,
                     std::vector<std::pair<std::string_view, int32_t>>& uncertain) {
  const std::vector<int32_t>& sorted = vocab.sorted();
  const std::vector<uint32_t>& lcp = vocab.lcp();
  const std::vector<uint32_t>& subtree_end = vocab.subtree_end();
  // completed_by[d]: the rule completed after some prefix of 1..d bytes of the current token.
  std::vector<uint8_t> completed_by(vocab.max_token_length() + 1, 0);
  size_t valid = 0;  // levels 0..valid hold the previous token's prefix
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string_view bytes = vocab.sorted_bytes(i);
    size_t depth = std::min<size_t>(lcp[i], valid);
    // Extend while something can still consume.
    while (depth < bytes.size() && levels.can_consume(depth)) {
      levels.step(depth, static_cast<unsigned char>(bytes[depth]));
      ++depth;
      completed_by[depth] = completed_by[depth - 1] || levels.complete(depth);
    }
    valid = depth;
    if (depth == bytes.size() && (levels.can_consume(depth) || levels.complete(depth))) {
      accepted.push_back(sorted[i]);
      continue;
    }
    if (!completed_by[depth]) {
      i = subtree_end[i] - 1;
      continue;
    }
    // The rule completed after d < size bytes (d >= 1: the first byte is always the state's own) for some d <= depth.
    for (size_t d = 1; d <= depth && d < bytes.size(); ++d)
      if (levels.complete(d)) uncertain.emplace_back(bytes.substr(d), sorted[i]);
  }
}

}  // namespace

StateTokens compute_state_tokens(const Automaton& automaton, const TokenVocabulary& vocab, int32_t state) {
  const size_t max_len = vocab.max_token_length();
  std::vector<int32_t> accepted;
  std::vector<std::pair<std::string_view, int32_t>> uncertain;  // (remainder, token), views into the vocabulary
  if (is_leaf(automaton, state)) {
    LeafLevels levels(automaton, state, max_len);
    walk_vocabulary(vocab, levels, accepted, uncertain);
  } else {
    StackLevels levels(automaton, state, max_len);
    walk_vocabulary(vocab, levels, accepted, uncertain);
  }
  StateTokens out;
  out.num_accepted = accepted.size();
  if (accepted.size() * 32 > static_cast<size_t>(vocab.size())) {
    out.accepted_mask.assign(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t id : accepted) out.accepted_mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  } else {
    std::sort(accepted.begin(), accepted.end());
    out.accepted_ids = std::move(accepted);
  }
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

}  // namespace qinfer::grammar
