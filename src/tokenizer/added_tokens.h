// Added tokens (tokenizer.json `added_tokens`): found in the text before BPE, the way HF tokenizers'
// AddedVocabulary does it — leftmost-longest matching over all token contents, then the per-token flags
// single_word / lstrip / rstrip, and skipping special tokens when special-token matching is off.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A stretch of text: either an added token (id >= 0) or plain text to pre-tokenize (id == -1).
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t id;
};

// A byte range [begin, end) of a text.
struct ByteRange {
  size_t begin;
  size_t end;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // patterns[i] is the text to look for (the content, or its normalized form for normalized tokens).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }

  // Splits valid UTF-8 text into segments covering it. A token flagged special is matched only where its text lies
  // wholly inside one of `special_allowed` (ascending, disjoint); elsewhere its text is left as text, and the search
  // goes on after it as HF's does (its bytes are not searched again for a shorter token).
  void split(std::string_view text, std::span<const ByteRange> special_allowed,
             std::vector<TextSegment>& segments) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;
    int32_t token_index = -1;  // index into tokens_ when a pattern ends here
  };
  // Longest pattern starting at text[pos]: {length, token index}, or {0, -1}.
  std::pair<size_t, int32_t> longest_match_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;  // node 0 is the root
  bool first_bytes_[256] = {};
};

}  // namespace qinfer
