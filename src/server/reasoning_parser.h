// vLLM's `--reasoning-parser qwen3`: splits a Qwen3 output into the reasoning inside <think>...</think> and the answer
// after it, as text streams in (a tag split across deltas is held back until it is whole). When the prompt already
// opened the reasoning (Qwen3-4B-Thinking-2507's template ends the generation prompt with <think>), the output starts
// inside it and only </think> appears. Without any tag the whole output is the answer.
#pragma once

#include <string>
#include <string_view>

namespace qinfer::server {

class ReasoningParser {
 public:
  // `started_in_reasoning`: the prompt ends inside an open <think>.
  explicit ReasoningParser(bool started_in_reasoning);

  struct Output {
    std::string reasoning;
    std::string content;
  };
  // The parts of `text` that are certain now; a possible tag prefix at the end is held back.
  Output push(std::string_view text);
  // End of output: whatever was held back.
  Output flush();
  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kStart, kReasoning, kAfterReasoning, kContent };
  void emit(std::string_view text, Output& out) const;
  State state_;
  std::string pending_;  // text not yet released: a possible tag prefix, or the start of the output
};

// Whether a rendered prompt ends inside an open <think> (the generation prompt opened the reasoning).
bool prompt_opens_reasoning(std::string_view prompt_text);

}  // namespace qinfer::server
