#include "tokenizer/incremental_detokenizer.h"

#include "util/utf8.h"

namespace qinfer {

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_bytes(id, skip_special_tokens_);
  const size_t stable = utf8::stable_prefix_length(pending_);
  if (stable == 0) return {};
  std::string_view ready(pending_.data(), stable);
  std::string text = utf8::is_valid(ready) ? std::string(ready) : utf8::to_valid_lossy(ready);
  pending_.erase(0, stable);
  return text;
}

std::string IncrementalDetokenizer::flush() {
  std::string text = utf8::to_valid_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace qinfer
