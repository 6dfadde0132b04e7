#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode_classes.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

char32_t last_char(std::string_view text) {
  size_t pos = utf8::previous_start(text, text.size());
  return utf8::decode_valid(text, pos);
}

// Start of the run of whitespace that ends text (HF: regex \s*$).
size_t trailing_space_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t begin = utf8::previous_start(text, end);
    size_t pos = begin;
    if (!unicode::is_white_space(utf8::decode_valid(text, pos))) break;
    end = begin;
  }
  return end;
}

// Length of the run of whitespace that starts text (HF: regex ^\s*).
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!unicode::is_white_space(utf8::decode_valid(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)), trie_(1) {
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& pattern = patterns[t];
    if (pattern.empty()) continue;
    first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
    uint32_t node = 0;
    for (char c : pattern) {
      const auto byte = static_cast<unsigned char>(c);
      auto& children = trie_[node].children;
      auto it = std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
      if (it != children.end()) {
        node = it->second;
      } else {
        const auto child = static_cast<uint32_t>(trie_.size());
        trie_[node].children.emplace_back(byte, child);
        trie_.emplace_back();
        node = child;
      }
    }
    // With duplicate patterns the first one wins, like the Aho-Corasick automaton HF builds.
    if (trie_[node].token_index < 0) trie_[node].token_index = static_cast<int32_t>(t);
  }
}

std::pair<size_t, int32_t> AddedTokenMatcher::longest_match_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = trie_[node].children;
    auto it = std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
    if (it == children.end()) break;
    node = it->second;
    if (trie_[node].token_index >= 0) best = {i + 1 - pos, trie_[node].token_index};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::span<const ByteRange> special_allowed,
                              std::vector<TextSegment>& segments) const {
  size_t start_offset = 0;  // end of the last emitted segment
  size_t search = 0;        // where the next leftmost-longest search begins
  size_t allowed = 0;       // first range of special_allowed that may still hold a match (matches come in order)
  while (search < text.size()) {
    if (!first_bytes_[static_cast<unsigned char>(text[search])]) {
      ++search;
      continue;
    }
    const auto [length, index] = longest_match_at(text, search);
    if (length == 0) {
      ++search;
      continue;
    }
    size_t start = search;
    size_t stop = search + length;
    search = stop;
    const AddedToken& token = tokens_[index];
    if (token.special) {
      while (allowed < special_allowed.size() && special_allowed[allowed].end <= start) ++allowed;
      const bool inside = allowed < special_allowed.size() && special_allowed[allowed].begin <= start &&
                          stop <= special_allowed[allowed].end;
      if (!inside) continue;
    }
    if (token.single_word) {
      const bool word_before = start > 0 && unicode::is_word_char(last_char(text.substr(0, start)));
      size_t after = stop;
      const bool word_after = stop < text.size() && unicode::is_word_char(utf8::decode_valid(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) segments.push_back({start_offset, start, -1});
    segments.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) segments.push_back({start_offset, text.size(), -1});
}

}  // namespace qinfer
