// Where in an output a constraint applies. A plain constraint covers the whole output; a scoped one may leave free
// text around it: a span the output may open with (a reasoning model's <think>...</think>, after which the grammar
// starts), or free text until a trigger token (a tool call's <tool_call>), after which the grammar matches what follows
// the trigger and, once matched whole, the output is free again until the next trigger. Not thread-safe (one per
// sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace qinfer::grammar {

struct ConstraintScope {
  // A free span the output may open with: `span_open` may come first, then any tokens but the stop ids until
  // `span_close`, and only then the grammar (or the triggers). -1: no span.
  int32_t span_open = -1;
  int32_t span_close = -1;
  bool starts_in_span = false;  // the prompt opened the span: the output starts inside it
  // Non-empty: free text (the stop ids included) until one of these tokens, then the grammar; once the grammar is
  // matched whole (nothing but a stop id could follow), free text again.
  std::vector<int32_t> triggers;
};

class ScopedMatcher {
 public:
  ScopedMatcher(std::shared_ptr<const CompiledGrammar> grammar, ConstraintScope scope);

  // mask.size() == vocab().mask_words(); bits of the ids allowed next.
  void fill_mask(std::span<uint32_t> mask);
  // Advances on `token`; false (state unchanged) when it is not allowed here.
  bool accept_token(int32_t token);
  // The grammar is in force now (false in the span and in free text).
  bool in_grammar() const { return phase_ == Phase::kGrammar; }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  enum class Phase { kSpanPossible, kInSpan, kFree, kGrammar };
  Phase after_span() const { return scope_.triggers.empty() ? Phase::kGrammar : Phase::kFree; }
  void enter(Phase phase);
  bool is_trigger(int32_t token) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  ConstraintScope scope_;
  Phase phase_ = Phase::kGrammar;
  std::optional<GrammarMatcher> matcher_;  // in kGrammar (and kSpanPossible, whose first token may start it)
};

}  // namespace qinfer::grammar
