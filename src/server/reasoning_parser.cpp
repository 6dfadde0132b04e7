#include "server/reasoning_parser.h"

namespace qinfer::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningParser::ReasoningParser(bool started_in_reasoning)
    : state_(started_in_reasoning ? State::kReasoning : State::kStart) {}

void ReasoningParser::emit(std::string_view text, Output& out) const {
  // kStart never emits; kAfterReasoning only drops newlines.
  (state_ == State::kReasoning ? out.reasoning : out.content) += text;
}

ReasoningParser::Output ReasoningParser::push(std::string_view text) {
  Output out;
  pending_ += text;
  while (!pending_.empty()) {
    if (state_ == State::kStart) {
      // The output opens reasoning only with <think> at its very start (after whitespace).
      const size_t first = pending_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return out;
      const std::string_view rest = std::string_view(pending_).substr(first);
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // wait for more
      if (rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, first + kOpen.size());
        state_ = State::kReasoning;
      } else {
        state_ = State::kContent;
      }
      continue;
    }
    if (state_ == State::kAfterReasoning) {
      // The template writes "</think>\n\n" before the answer; those newlines are not part of it.
      const size_t answer = pending_.find_first_not_of('\n');
      pending_.erase(0, answer == std::string::npos ? pending_.size() : answer);
      if (answer != std::string::npos) state_ = State::kContent;
      continue;
    }
    if (state_ == State::kContent) {
      emit(pending_, out);
      pending_.clear();
      return out;
    }
    const size_t close = pending_.find(kClose);
    if (close != std::string::npos) {
      emit(std::string_view(pending_).substr(0, close), out);
      pending_.erase(0, close + kClose.size());
      state_ = State::kAfterReasoning;
      continue;
    }
    const size_t held = partial_tag_suffix(pending_, kClose);
    emit(std::string_view(pending_).substr(0, pending_.size() - held), out);
    pending_.erase(0, pending_.size() - held);
    return out;
  }
  return out;
}

ReasoningParser::Output ReasoningParser::flush() {
  Output out;
  if (state_ == State::kStart) state_ = State::kContent;
  if (state_ != State::kAfterReasoning) emit(pending_, out);
  pending_.clear();
  return out;
}

bool prompt_opens_reasoning(std::string_view prompt_text) {
  const size_t open = prompt_text.rfind(kOpen);
  return open != std::string_view::npos && prompt_text.find(kClose, open) == std::string_view::npos;
}

}  // namespace qinfer::server
