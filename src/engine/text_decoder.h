// The engine's view of incremental detokenization: token ids in, newly completed text out. The tokenizer layer
// provides the implementation (an adapter over qinfer::IncrementalDetokenizer); the engine runs at token level
// when none is given.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace qinfer {

class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // Text that became final with this token (may be empty while a UTF-8 sequence is incomplete).
  virtual std::string push(int32_t token) = 0;
  // Whatever is still buffered when generation ends.
  virtual std::string flush() = 0;
};

// Makes one decoder per generated sample. Called on the engine thread; must be cheap and must not block.
using TextDecoderFactory = std::function<std::unique_ptr<TextDecoder>()>;

}  // namespace qinfer
