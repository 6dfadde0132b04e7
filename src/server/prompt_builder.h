// Turns chat messages (through the model's chat template) or raw prompts into token ids, keeping client-supplied
// message content from forging control tokens.
//
// Method (docs/API.md §Prompt safety): when no user/system/tool content contains the text of a special token, the
// rendered template is tokenized as HF does (special tokens matched). Otherwise the template is rendered a second
// time with each such content replaced by a random placeholder; the render is split at the placeholders, special
// tokens are matched only in the template's own text, and every stretch between two special tokens (template text
// and content together, as HF's added-token split would give) is encoded with special-token matching off. For benign
// content this gives exactly HF's ids; for hostile content the forged markers become plain text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::server {

class PromptBuilder {
 public:
  // `allow_special_tokens_in_content` restores HF's behaviour (content may contain control tokens).
  PromptBuilder(Tokenizer tokenizer, ChatTemplate chat_template, bool allow_special_tokens_in_content);

  // Renders and tokenizes. Throws Error(kInvalidArgument) for template errors.
  std::vector<int32_t> chat_prompt(const ChatTemplateInputs& inputs) const;
  // The rendered template text (as HF's apply_chat_template(tokenize=False)).
  std::string render(const ChatTemplateInputs& inputs) const { return template_.render(inputs); }
  // A raw completion prompt: the client controls the whole text, so special tokens are matched (as vLLM does).
  std::vector<int32_t> text_prompt(std::string_view text) const { return tokenizer_.encode(text, true); }

  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  struct SpecialToken {
    std::string text;
    int32_t id;
  };
  bool contains_special_text(std::string_view text) const;
  // Encodes `text` whose byte ranges [first, second) in `protected_ranges` (ascending) are client content: special
  // tokens are matched only outside them.
  std::vector<int32_t> encode_protected(const std::string& text,
                                        const std::vector<std::pair<size_t, size_t>>& protected_ranges) const;

  Tokenizer tokenizer_;
  ChatTemplate template_;
  bool allow_special_tokens_in_content_;
  std::vector<SpecialToken> special_tokens_;  // longest first, so a scan finds the longest match
  std::string placeholder_prefix_;            // random per server, so clients cannot guess it
};

}  // namespace qinfer::server
