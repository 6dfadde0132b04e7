// The engine's TextDecoder over the tokenizer's IncrementalDetokenizer (special tokens skipped, as OpenAI servers
// return text).
#pragma once

#include <memory>

#include "engine/text_decoder.h"
#include "tokenizer/incremental_detokenizer.h"

namespace qinfer::server {

class DetokenizerTextDecoder : public TextDecoder {
 public:
  explicit DetokenizerTextDecoder(const Tokenizer& tokenizer) : detokenizer_(tokenizer, true) {}
  std::string push(int32_t token) override { return detokenizer_.push(token); }
  std::string flush() override { return detokenizer_.flush(); }

 private:
  IncrementalDetokenizer detokenizer_;
};

inline TextDecoderFactory detokenizer_factory(Tokenizer tokenizer) {
  return [tokenizer = std::move(tokenizer)] { return std::make_unique<DetokenizerTextDecoder>(tokenizer); };
}

}  // namespace qinfer::server
