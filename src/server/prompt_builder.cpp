#include "server/prompt_builder.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "util/utf8.h"

namespace qinfer::server {
namespace {

std::string random_hex(size_t digits) {
  std::random_device device;
  std::string out;
  while (out.size() < digits) {
    char chunk[9];
    std::snprintf(chunk, sizeof chunk, "%08x", device());
    out += chunk;
  }
  return out.substr(0, digits);
}

// U+E000 and U+E001 (private use) bracket the marker: never produced by templates, and the random part makes a
// client-written look-alike useless.
constexpr std::string_view kMarkerOpen = "\xEE\x80\x80";
constexpr std::string_view kMarkerClose = "\xEE\x80\x81";

}  // namespace

PromptBuilder::PromptBuilder(Tokenizer tokenizer, ChatTemplate chat_template, bool allow_special_tokens_in_content)
    : tokenizer_(std::move(tokenizer)),
      template_(std::move(chat_template)),
      allow_special_tokens_in_content_(allow_special_tokens_in_content),
      marker_(std::string(kMarkerOpen) + "qinfer-" + random_hex(24) + std::string(kMarkerClose)) {
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id)
    if (tokenizer_.is_special(id)) {
      std::string_view text = tokenizer_.token_bytes(id, false);
      if (text.empty()) continue;
      special_texts_.emplace_back(text);
      special_first_bytes_[static_cast<unsigned char>(text[0])] = true;
    }
}

bool PromptBuilder::mark_string(std::string& text) const {
  // Every start of a special-token text, overlapping ones included, gets a marker after its first character.
  std::vector<size_t> cuts;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!special_first_bytes_[static_cast<unsigned char>(text[pos])]) continue;
    const bool starts_token = std::any_of(special_texts_.begin(), special_texts_.end(), [&](const std::string& token) {
      return text.compare(pos, token.size(), token) == 0;
    });
    if (!starts_token) continue;
    size_t after_first = pos;
    utf8::decode_lenient(text, after_first);
    if (cuts.empty() || cuts.back() != after_first) cuts.push_back(after_first);
  }
  for (auto cut = cuts.rbegin(); cut != cuts.rend(); ++cut) text.insert(*cut, marker_);
  return !cuts.empty();
}

bool PromptBuilder::mark_json(nlohmann::ordered_json& value) const {
  if (value.is_string()) return mark_string(value.get_ref<std::string&>());
  bool marked = false;
  if (value.is_array()) {
    for (auto& item : value) marked = mark_json(item) || marked;
  } else if (value.is_object()) {
    bool keys_marked = false;
    for (auto& [key, item] : value.items()) {
      std::string name = key;
      keys_marked = mark_string(name) || keys_marked;
      marked = mark_json(item) || marked;
    }
    if (keys_marked) {  // keys cannot be changed in place: the object is rebuilt in its order
      nlohmann::ordered_json rebuilt = nlohmann::ordered_json::object();
      for (auto& [key, item] : value.items()) {
        std::string name = key;
        mark_string(name);
        rebuilt[name] = std::move(item);
      }
      value = std::move(rebuilt);
    }
    marked = marked || keys_marked;
  }
  return marked;
}

std::vector<int32_t> PromptBuilder::chat_prompt(const ChatTemplateInputs& inputs) const {
  if (allow_special_tokens_in_content_) return tokenizer_.encode(template_.render(inputs), true);
  ChatTemplateInputs marked = inputs;
  bool any = mark_json(marked.messages);
  any = mark_json(marked.tools) || any;
  any = mark_json(marked.extra_kwargs) || any;
  if (!any) return tokenizer_.encode(template_.render(inputs), true);
  return encode_marked_render(template_.render(marked));
}

std::vector<int32_t> PromptBuilder::encode_marked_render(std::string_view rendered) const {
  // The render without markers, and the spots (byte offsets in it) where markers were.
  std::string text;
  std::vector<size_t> spots;
  size_t pos = 0;
  for (size_t found; (found = rendered.find(marker_, pos)) != std::string_view::npos; pos = found + marker_.size()) {
    text.append(rendered, pos, found - pos);
    spots.push_back(text.size());
  }
  text.append(rendered, pos, std::string_view::npos);

  // Around each spot the character before and the one after are client text: no special token may cover them.
  std::vector<TextPart> parts;
  size_t allowed_from = 0;
  for (size_t spot : spots) {
    const size_t begin = std::max(spot == 0 ? 0 : utf8::previous_start(text, spot), allowed_from);
    size_t end = spot;
    if (end < text.size()) utf8::decode_lenient(text, end);
    if (allowed_from < begin)
      parts.push_back({std::string_view(text).substr(allowed_from, begin - allowed_from), true});
    if (begin < end) parts.push_back({std::string_view(text).substr(begin, end - begin), false});
    allowed_from = std::max(allowed_from, end);
  }
  if (allowed_from < text.size()) parts.push_back({std::string_view(text).substr(allowed_from), true});
  return tokenizer_.encode(parts);
}

}  // namespace qinfer::server
