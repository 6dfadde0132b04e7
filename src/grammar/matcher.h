// One sequence's position in a constraint: yields the bitmask of the tokens allowed next over the whole vocabulary,
// and advances on the token sampled. The stop ids are allowed exactly where the constraint is complete; accepting one
// terminates the matcher. Not thread-safe (one matcher per sequence); many matchers may share a CompiledGrammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/parse_state.h"

namespace qinfer::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // mask[id / 32] bit id % 32 set when token id is allowed; mask.size() == vocab().mask_words().
  void fill_mask(std::span<uint32_t> mask);
  // Advances on `token`; false (state unchanged) when the token is not allowed here.
  bool accept_token(int32_t token);
  // Advances on raw bytes (tests, forced text); false (state unchanged) when they do not fit.
  bool accept_bytes(std::string_view bytes);
  // The constraint is complete here: the stop ids are allowed (more bytes may be too).
  bool is_complete() const { return current_.complete; }
  // A stop id was accepted.
  bool is_terminated() const { return terminated_; }
  // Nothing but a stop id can follow.
  bool must_stop() const { return current_.size() == 0; }
  const CompiledGrammar& grammar() const { return *grammar_; }
  // The stacks still possible (for diagnostics and reference checks).
  const StackSet& stacks() const { return current_; }

 private:
  void add_uncertain(std::span<const int32_t> stack, const StateTokens& tokens, std::span<uint32_t> mask);
  std::shared_ptr<const CompiledGrammar> grammar_;
  Parser parser_;
  StackSet current_, next_a_, next_b_;
  std::vector<StackSet> levels_;  // remainder walk scratch
  bool terminated_ = false;
};

}  // namespace qinfer::grammar
