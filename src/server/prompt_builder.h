// Turns chat messages (through the model's chat template) or raw prompts into token ids, keeping client-supplied text
// from forging control tokens.
//
// Method (docs/API.md §Prompt safety): client text is every string of the request that reaches the template —
// message fields of every role, tool definitions (names, descriptions, parameter schemas, keys included) and
// chat_template_kwargs values. When none of it contains the text of a special token, the rendered template is
// tokenized as HF does (special tokens matched). Otherwise a marker (private-use characters around a random nonce)
// is put after the first character of every special-token text inside those strings and the template rendered; the
// markers are taken out of the render again and the tokenizer encodes it in parts (Tokenizer::encode over
// TextParts), where no special token may cover the spot of a marker. Whatever the template does with the strings,
// a forged marker stays plain text; the template's own control tokens stay real.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::server {

class PromptBuilder {
 public:
  // `allow_special_tokens_in_content` restores HF's behaviour (client text may contain control tokens).
  PromptBuilder(Tokenizer tokenizer, ChatTemplate chat_template, bool allow_special_tokens_in_content);

  // Renders and tokenizes. Throws Error(kInvalidArgument) for template errors.
  std::vector<int32_t> chat_prompt(const ChatTemplateInputs& inputs) const;
  // The rendered template text (as HF's apply_chat_template(tokenize=False)).
  std::string render(const ChatTemplateInputs& inputs) const { return template_.render(inputs); }
  // A raw completion prompt: the client controls the whole text, so special tokens are matched (as vLLM does).
  std::vector<int32_t> text_prompt(std::string_view text) const { return tokenizer_.encode(text, true); }

  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  // Puts the marker into every special-token text of `text`; false when it holds none.
  bool mark_string(std::string& text) const;
  // mark_string over every string and object key of `value`; false when none held special-token text.
  bool mark_json(nlohmann::ordered_json& value) const;
  // Encodes a render of marked inputs: markers removed, no special token matched across the spot of one.
  std::vector<int32_t> encode_marked_render(std::string_view rendered) const;

  Tokenizer tokenizer_;
  ChatTemplate template_;
  bool allow_special_tokens_in_content_;
  std::vector<std::string> special_texts_;
  std::array<bool, 256> special_first_bytes_{};  // bytes that start a special-token text
  std::string marker_;                           // random per server, so clients cannot write one
};

}  // namespace qinfer::server
