#include "engine/tokenizer_text_decoder.h"

#include "tokenizer/incremental_detokenizer.h"

namespace qinfer {
namespace {

class DetokenizerTextDecoder final : public TextDecoder {
 public:
  DetokenizerTextDecoder(Tokenizer tokenizer, bool skip_special_tokens)
      : detokenizer_(std::move(tokenizer), skip_special_tokens) {}
  std::string push(int32_t token) override { return detokenizer_.push(token); }
  std::string flush() override { return detokenizer_.flush(); }

 private:
  IncrementalDetokenizer detokenizer_;
};

}  // namespace

TextDecoderFactory make_tokenizer_text_decoder(Tokenizer tokenizer, bool skip_special_tokens) {
  return [tokenizer = std::move(tokenizer), skip_special_tokens] {
    return std::make_unique<DetokenizerTextDecoder>(tokenizer, skip_special_tokens);
  };
}

}  // namespace qinfer
