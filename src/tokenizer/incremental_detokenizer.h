// Streaming ids → text for one sequence. push() returns only text that can no longer change: bytes of a UTF-8
// character split across tokens are held until the character completes, so deltas are always valid UTF-8 and their
// concatenation (plus flush()) equals Tokenizer::decode of all pushed ids. Costs O(token length) per push.
// Stop strings spanning token boundaries are matched by the caller on these deltas.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace qinfer {

class IncrementalDetokenizer {
 public:
  // Keeps a copy of the tokenizer handle (shared state, cheap).
  explicit IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens = true)
      : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

  // The text completed by this token (often empty while a multi-byte character is pending).
  std::string push(int32_t id);
  // Whatever is still held, with an incomplete character turned into U+FFFD (as decode does at the end).
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // at most 3 bytes: the start of a character that is not complete yet
};

}  // namespace qinfer
