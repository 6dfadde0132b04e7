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
  // End of generation: a call left open whose body is already a complete call is returned as a call; any other
  // unfinished call (or a held-back partial tag) is returned as content.
  Output finish();

  bool saw_calls() const { return num_calls_ > 0; }

 private:
  // Appends the call in `body` (the text between the tags) to `out`; false when it is not a valid call.
  bool parse_call(std::string_view body, Output& out);

  // The visible text of a call that did not parse (the opening tag and the body).
  static std::string unparsed_call_text(std::string_view body);

  // Where the closing tag starts in the open call's buffer_, npos while it has not arrived. A closing tag inside a JSON
  // string of the body (an argument that quotes the tag) is the string's content, not the end of the call.
  size_t find_close();

  std::string buffer_;  // unreleased text: a possible tag start, or the body of an open call
  bool in_call_ = false;
  // The open call's body scanned so far: buffer_[0, scanned_) with the JSON string state at its end.
  size_t scanned_ = 0;
  bool in_string_ = false, escaped_ = false;
  int num_calls_ = 0;
};

}  // namespace qinfer::server
