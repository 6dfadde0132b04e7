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
  // Ids with bytes in byte order, and lcp[i] = common prefix length of sorted()[i] and sorted()[i - 1] (0 for i = 0).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<uint32_t>& lcp() const { return lcp_; }
  // subtree_end()[i]: the first sorted index after i whose token does not start with sorted()[i]'s bytes, so that
  // [i, subtree_end()[i]) is the trie subtree below that token (a walk that rejects a token skips its extensions).
  const std::vector<uint32_t>& subtree_end() const { return subtree_end_; }
  // The bytes of sorted()[i], stored contiguously in sorted order so that vocabulary walks read memory in sequence.
  std::string_view sorted_bytes(size_t i) const {
    return std::string_view(sorted_data_).substr(sorted_offset_[i], sorted_offset_[i + 1] - sorted_offset_[i]);
  }
  size_t max_token_length() const { return max_length_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> sorted_;
  std::vector<uint32_t> lcp_;
  std::vector<uint32_t> subtree_end_;
  std::string sorted_data_;
  std::vector<uint32_t> sorted_offset_;  // [sorted().size() + 1]
  size_t max_length_ = 0;
};

}  // namespace qinfer::grammar
