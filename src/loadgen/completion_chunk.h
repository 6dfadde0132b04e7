// What one SSE event of an OpenAI-style streamed completion tells the benchmark: text arrived, usage, an error, or
// the end. Works for /v1/completions (choices[].text) and /v1/chat/completions (choices[].delta.content, and
// delta.reasoning_content that reasoning servers stream separately).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qinfer::loadgen {

struct CompletionChunk {
  bool done = false;                      // the `[DONE]` sentinel
  bool has_text = false;                  // a non-empty text/content delta: the arrival of output tokens
  std::optional<long> prompt_tokens;      // usage.prompt_tokens
  std::optional<long> completion_tokens;  // usage.completion_tokens
  std::optional<std::string> error;       // `{"error": {...}}` sent inside the stream, or a payload that is not JSON
};

CompletionChunk parse_completion_chunk(std::string_view data);

}  // namespace qinfer::loadgen
