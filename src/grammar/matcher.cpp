#include "grammar/matcher.h"

#include <algorithm>

namespace qinfer::grammar {
namespace {

void set_bit(std::span<uint32_t> mask, int32_t id) { mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32); }

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), parser_(grammar_->automaton()), levels_(grammar_->vocab().max_token_length() + 1) {
  const Automaton& a = grammar_->automaton();
  const int32_t start = a.rule_start[static_cast<size_t>(a.root_rule)];
  parser_.expand(std::vector<int32_t>{kBottom, start}, current_);
}

void GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  const TokenVocabulary& vocab = grammar_->vocab();
  if (!terminated_) {
    for (size_t i = 0; i < current_.size(); ++i) {
      const std::span<const int32_t> stack = current_.stack(i);
      const StateTokens& tokens = grammar_->state_tokens(stack.back());
      if (!tokens.accepted_mask.empty()) {
        for (size_t w = 0; w < mask.size(); ++w) mask[w] |= tokens.accepted_mask[w];
      } else {
        for (int32_t id : tokens.accepted_ids) set_bit(mask, id);
      }
      if (!tokens.remainders.empty()) add_uncertain(stack, tokens, mask);
    }
  }
  if (current_.complete || terminated_)
    for (int32_t id : vocab.stop_ids())
      if (id >= 0 && id < vocab.size()) set_bit(mask, id);
}

// The uncertain tokens of the stack's top state: the top's rule completes inside them, so each remainder is walked
// from the stack below (sorted remainders share their common prefixes' steps).
void GrammarMatcher::add_uncertain(std::span<const int32_t> stack, const StateTokens& tokens,
                                   std::span<uint32_t> mask) {
  levels_[0].clear();
  parser_.expand(stack.first(stack.size() - 1), levels_[0]);
  size_t valid = 0;
  for (size_t r = 0; r < tokens.remainders.size(); ++r) {
    const std::string& bytes = tokens.remainders[r];
    size_t depth = std::min<size_t>(tokens.remainder_lcp[r], valid);
    while (depth < bytes.size() && levels_[depth].size() > 0) {
      parser_.step(levels_[depth], static_cast<unsigned char>(bytes[depth]), levels_[depth + 1]);
      ++depth;
    }
    valid = depth;
    if (depth == bytes.size() && !levels_[depth].dead())
      for (uint32_t t = tokens.remainder_begin[r]; t < tokens.remainder_begin[r + 1]; ++t)
        set_bit(mask, tokens.remainder_tokens[t]);
  }
}

bool GrammarMatcher::accept_token(int32_t token) {
  const TokenVocabulary& vocab = grammar_->vocab();
  if (terminated_ || token < 0 || token >= vocab.size()) return false;
  if (vocab.is_stop(token)) {
    if (!current_.complete) return false;
    terminated_ = true;
    return true;
  }
  const std::string_view bytes = vocab.bytes(token);
  return !bytes.empty() && accept_bytes(bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  if (bytes.empty()) return true;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  StackSet& result = parser_.run(current_, {data, bytes.size()}, next_a_, next_b_);
  if (result.dead()) return false;
  std::swap(current_, result);
  return true;
}

}  // namespace qinfer::grammar
