// Finds Qwen3/Hermes-style tool calls in generated text: `<tool_call>\n{"name": ..., "arguments":
// {...}}\n</tool_call>`. Streaming-safe: text is fed as it is generated; content is released only once it cannot be the
// start of a tag, and a call is released whole when its closing tag arrives, so no tag text ever reaches `content` and
// the arguments sent for a call are always one complete JSON text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qinfer::server {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

class ToolCallParser {
 public:
  struct Output {
    std::string content;                // text to show as the message content
    std::vector<ParsedToolCall> calls;  // calls completed by this input
  };

  Output push(std::string_view text);
  // End of generation: an unfinished call (or a held-back partial tag) is returned as content.
  Output finish();

  bool saw_calls() const { return num_calls_ > 0; }

 private:
  void parse_call(std::string_view body, Output& out);

  std::string buffer_;  // unreleased text: a possible tag start, or the body of an open call
  bool in_call_ = false;
  int num_calls_ = 0;
};

}  // namespace qinfer::server
