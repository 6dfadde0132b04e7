#include "grammar/scoped_matcher.h"

#include <algorithm>

namespace qinfer::grammar {
namespace {

void set_bit(std::span<uint32_t> mask, int32_t id) { mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32); }

void clear_bit(std::span<uint32_t> mask, int32_t id) { mask[static_cast<size_t>(id) / 32] &= ~(1u << (id % 32)); }

// Every id of the vocabulary; the stop ids too when `with_stops`.
void fill_all(std::span<uint32_t> mask, const TokenVocabulary& vocab, bool with_stops) {
  std::fill(mask.begin(), mask.end(), ~0u);
  if (const int tail = vocab.size() % 32; tail != 0) mask[mask.size() - 1] = (1u << tail) - 1;
  if (!with_stops)
    for (int32_t id : vocab.stop_ids())
      if (id >= 0 && id < vocab.size()) clear_bit(mask, id);
}

}  // namespace

ScopedMatcher::ScopedMatcher(std::shared_ptr<const CompiledGrammar> grammar, ConstraintScope scope)
    : grammar_(std::move(grammar)), scope_(std::move(scope)) {
  if (scope_.starts_in_span && scope_.span_close >= 0)
    enter(Phase::kInSpan);
  else if (scope_.span_open >= 0 && scope_.span_close >= 0)
    enter(Phase::kSpanPossible);
  else
    enter(after_span());
}

void ScopedMatcher::enter(Phase phase) {
  phase_ = phase;
  if (phase == Phase::kGrammar || (phase == Phase::kSpanPossible && after_span() == Phase::kGrammar))
    matcher_.emplace(grammar_);
  else
    matcher_.reset();
}

bool ScopedMatcher::is_trigger(int32_t token) const {
  return std::find(scope_.triggers.begin(), scope_.triggers.end(), token) != scope_.triggers.end();
}

void ScopedMatcher::fill_mask(std::span<uint32_t> mask) {
  const TokenVocabulary& vocab = grammar_->vocab();
  switch (phase_) {
    case Phase::kSpanPossible:
      if (matcher_)
        matcher_->fill_mask(mask);
      else
        fill_all(mask, vocab, true);
      set_bit(mask, scope_.span_open);
      return;
    case Phase::kInSpan:
      fill_all(mask, vocab, false);
      return;
    case Phase::kFree:
      fill_all(mask, vocab, true);
      return;
    case Phase::kGrammar:
      matcher_->fill_mask(mask);
      return;
  }
}

bool ScopedMatcher::accept_token(int32_t token) {
  if (token < 0 || token >= grammar_->vocab().size()) return false;
  switch (phase_) {
    case Phase::kSpanPossible:
      if (token == scope_.span_open) {
        enter(Phase::kInSpan);
        return true;
      }
      phase_ = after_span();
      return accept_token(token);
    case Phase::kInSpan:
      if (grammar_->vocab().is_stop(token)) return false;
      if (token == scope_.span_close) enter(after_span());
      return true;
    case Phase::kFree:
      if (is_trigger(token)) enter(Phase::kGrammar);
      return true;
    case Phase::kGrammar:
      if (!matcher_->accept_token(token)) return false;
      if (!scope_.triggers.empty() && matcher_->must_stop() && !matcher_->is_terminated()) enter(Phase::kFree);
      return true;
  }
  return false;
}

}  // namespace qinfer::grammar
