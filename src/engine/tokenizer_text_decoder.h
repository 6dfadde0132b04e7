// The engine's TextDecoder over the tokenizer layer's IncrementalDetokenizer: streamed deltas are valid UTF-8 and
// concatenate to Tokenizer::decode of the generated ids.
#pragma once

#include "engine/text_decoder.h"
#include "tokenizer/tokenizer.h"

namespace qinfer {

// One IncrementalDetokenizer per generated sample; special tokens (eos, im_end) are dropped when skip_special_tokens.
TextDecoderFactory make_tokenizer_text_decoder(Tokenizer tokenizer, bool skip_special_tokens = true);

}  // namespace qinfer
