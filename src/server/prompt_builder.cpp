#include "server/prompt_builder.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace qinfer::server {
namespace {

bool is_protected_role(const nlohmann::ordered_json& message) {
  if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) return false;
  const std::string& role = message["role"].get_ref<const std::string&>();
  return role == "user" || role == "system" || role == "tool";
}

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

// U+E000 and U+E001 (private use) bracket the placeholders: never produced by templates, and the random part makes
// a client-written look-alike useless.
constexpr std::string_view kPlaceholderOpen = "\xEE\x80\x80";
constexpr std::string_view kPlaceholderClose = "\xEE\x80\x81";

}  // namespace

PromptBuilder::PromptBuilder(Tokenizer tokenizer, ChatTemplate chat_template, bool allow_special_tokens_in_content)
    : tokenizer_(std::move(tokenizer)),
      template_(std::move(chat_template)),
      allow_special_tokens_in_content_(allow_special_tokens_in_content),
      placeholder_prefix_(std::string(kPlaceholderOpen) + "qinfer-content-" + random_hex(24) + "-") {
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id)
    if (tokenizer_.is_special(id)) {
      std::string_view text = tokenizer_.token_bytes(id, false);
      if (!text.empty()) special_tokens_.push_back({std::string(text), id});
    }
  std::sort(special_tokens_.begin(), special_tokens_.end(),
            [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
}

bool PromptBuilder::contains_special_text(std::string_view text) const {
  return std::any_of(special_tokens_.begin(), special_tokens_.end(),
                     [&](const SpecialToken& token) { return text.find(token.text) != std::string_view::npos; });
}

std::vector<int32_t> PromptBuilder::chat_prompt(const ChatTemplateInputs& inputs) const {
  if (allow_special_tokens_in_content_) return tokenizer_.encode(template_.render(inputs), true);
  std::vector<std::string> hostile;  // content strings that contain special-token text, by placeholder index
  ChatTemplateInputs masked = inputs;
  for (auto& message : masked.messages) {
    if (!is_protected_role(message) || !message.contains("content") || !message["content"].is_string()) continue;
    std::string& content = message["content"].get_ref<std::string&>();
    if (!contains_special_text(content)) continue;
    hostile.push_back(content);
    content = placeholder_prefix_ + std::to_string(hostile.size() - 1) + std::string(kPlaceholderClose);
  }
  if (hostile.empty()) return tokenizer_.encode(template_.render(inputs), true);

  const std::string rendered = template_.render(masked);
  std::string text;
  std::vector<std::pair<size_t, size_t>> protected_ranges;
  size_t pos = 0;
  while (true) {
    size_t found = rendered.find(placeholder_prefix_, pos);
    size_t close = found == std::string::npos ? found : rendered.find(kPlaceholderClose, found);
    if (close == std::string::npos) {
      text.append(rendered, pos, std::string::npos);
      break;
    }
    text.append(rendered, pos, found - pos);
    size_t index_begin = found + placeholder_prefix_.size();
    size_t index = std::stoul(rendered.substr(index_begin, close - index_begin));
    protected_ranges.emplace_back(text.size(), text.size() + hostile.at(index).size());
    text += hostile[index];
    pos = close + kPlaceholderClose.size();
  }
  return encode_protected(text, protected_ranges);
}

std::vector<int32_t> PromptBuilder::encode_protected(
    const std::string& text, const std::vector<std::pair<size_t, size_t>>& protected_ranges) const {
  std::vector<int32_t> ids;
  auto flush = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    std::vector<int32_t> piece = tokenizer_.encode(std::string_view(text).substr(begin, end - begin), false);
    ids.insert(ids.end(), piece.begin(), piece.end());
  };
  size_t piece_begin = 0;
  size_t range = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    while (range < protected_ranges.size() && protected_ranges[range].second <= pos) ++range;
    const bool in_content = range < protected_ranges.size() && protected_ranges[range].first <= pos;
    if (in_content) {
      pos = protected_ranges[range].second;
      continue;
    }
    const size_t limit = range < protected_ranges.size() ? protected_ranges[range].first : text.size();
    const SpecialToken* match = nullptr;
    for (const SpecialToken& token : special_tokens_)
      if (pos + token.text.size() <= limit && text.compare(pos, token.text.size(), token.text) == 0) {
        match = &token;
        break;
      }
    if (!match) {
      ++pos;
      continue;
    }
    flush(piece_begin, pos);
    ids.push_back(match->id);
    pos += match->text.size();
    piece_begin = pos;
  }
  flush(piece_begin, text.size());
  return ids;
}

}  // namespace qinfer::server
