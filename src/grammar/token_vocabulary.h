// The vocabulary as the grammar engine sees it: the bytes every token id stands for (byte-level BPE pieces, which may
// split a UTF-8 character), sorted so that tokens sharing a prefix are walked together, and the ids that end a
// sequence. Special tokens have no bytes: a constraint never allows them, except the stop ids once it is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {
class Tokenizer;
}

namespace qinfer::grammar {

// Token ids in byte order with what a walk over them as a trie needs: lcp(i), the common prefix length of tokens i
// and i - 1 (0 for i = 0), and subtree_end(i), the first index after i whose token does not start with token i's bytes
// ([i, subtree_end(i)) is the subtree below that token: a walk that rejects a token skips its extensions). The bytes
// are stored contiguously in that order so that a walk reads memory in sequence.
class TokenTrie {
 public:
  TokenTrie() = default;
  TokenTrie(std::vector<int32_t> ids, const std::vector<std::string>& bytes_of_id);
  size_t size() const { return ids_.size(); }
  int32_t id(size_t i) const { return ids_[i]; }
  std::string_view bytes(size_t i) const {
    return std::string_view(data_).substr(offset_[i], offset_[i + 1] - offset_[i]);
  }
  uint32_t lcp(size_t i) const { return lcp_[i]; }
  uint32_t subtree_end(size_t i) const { return subtree_end_[i]; }

 private:
  std::vector<int32_t> ids_;
  std::vector<uint32_t> lcp_;
  std::vector<uint32_t> subtree_end_;
  std::string data_;
  std::vector<uint32_t> offset_;  // [size() + 1]
};

class TokenVocabulary {
 public:
  // token_bytes[id] for every id of the model's vocabulary (empty: never allowed); stop_ids end the sequence.
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_ids);
  // Ids [0, vocab_size) of a model whose embedding may be larger than the tokenizer's vocabulary.
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tokenizer, int vocab_size,
                                                               std::vector<int32_t> stop_ids);

  int size() const { return static_cast<int>(bytes_.size()); }
  int mask_words() const { return (size() + 31) / 32; }  // uint32 words of a token bitmask
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool is_stop(int32_t id) const;
  // The tokens with bytes (not the stop ids), split by length: a split of the short ones depends only on the automaton
  // within kShortTokenBytes bytes of a state, so states that look alike that far share it (compiled_grammar.h).
  static constexpr size_t kShortTokenBytes = 16;
  const TokenTrie& short_tokens() const { return short_tokens_; }
  const TokenTrie& long_tokens() const { return long_tokens_; }
  size_t max_token_length() const { return max_length_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> stop_ids_;
  TokenTrie short_tokens_, long_tokens_;
  size_t max_length_ = 0;
};

}  // namespace qinfer::grammar
