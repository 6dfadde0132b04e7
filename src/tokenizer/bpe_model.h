// The BPE model of a byte-level tokenizer: byte ids and merge ranks. Turns the raw bytes of one pre-tokenized piece
// into token ids the way HF tokenizers' BPE does (repeatedly merge the adjacent pair with the lowest rank, leftmost
// first; no dropout, no byte fallback, bytes without a vocab entry are dropped). Immutable after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/string_id_map.h"

namespace qinfer {

class BpeModel {
 public:
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t merged;
  };

  // byte_ids[b]: id of the single-byte token for byte b, or -1. merges in rank order (rank = index).
  // raw_vocab: raw bytes → id; used only when ignore_merges is set (a whole piece found in the vocab is one token).
  BpeModel(const int32_t (&byte_ids)[256], const std::vector<Merge>& merges, bool ignore_merges, StringIdMap raw_vocab);

  // Appends the ids of one piece to out.
  void encode_piece(std::string_view piece_bytes, std::vector<int32_t>& out) const;

 private:
  struct PairSlot {
    uint64_t key = kEmptyKey;  // left << 32 | right
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static constexpr int32_t kNoRank = INT32_MAX;

  const PairSlot* find_pair(int32_t left, int32_t right) const;
  int32_t pair_rank(int32_t left, int32_t right) const;
  void merge_small(std::vector<int32_t>& symbols) const;
  void merge_large(std::vector<int32_t>& symbols) const;

  int32_t byte_ids_[256];
  std::vector<PairSlot> pairs_;  // [power of two] open addressing on the pair key
  uint64_t pair_mask_ = 0;
  bool ignore_merges_;
  StringIdMap raw_vocab_;
};

}  // namespace qinfer
