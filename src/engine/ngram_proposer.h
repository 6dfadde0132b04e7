// Prompt lookup ("n-gram") proposals: the tokens that followed the latest earlier occurrence of the sequence's last
// n tokens, for the longest n in [min_n, max_n] that occurs. Code edits, quotes and repeated structure make the
// continuation of a repeated n-gram likely to repeat too; the target model verifies every proposal.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qinfer {

// One sequence's n-gram index: for every n in [min_n, max_n], where the latest occurrence of each n-gram of the token
// list ends, kept up to date as the list grows, so that a proposal costs O(max_n - min_n + 1) lookups however long the
// context is (a scan of a 128 K-token history for a suffix that never occurred is ~0.5 M comparisons per step).
// Memory: 8-16 bytes per token for each indexed n (4-byte slots, at most half of them used). Ranges of more than
// kMaxIndexedLengths lengths are not indexed: they scan the history, as a pure function of it.
class NgramIndex {
 public:
  static constexpr int32_t kMaxIndexedLengths = 32;

  // Replaces `out` with `max_tokens` proposed continuations of `tokens` (prompt then output): the repetition implied
  // by the match, continued periodically where it runs past the end; empty when no suffix of min_n..max_n tokens
  // occurred before. `tokens` must extend the list of the previous call (the index is rebuilt when it is shorter or
  // the range changed). The proposals depend only on `tokens`, min_n, max_n and max_tokens.
  void propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
               std::vector<int32_t>& out);

 private:
  // Open addressing over slots holding 1 + the end position (exclusive) of an n-gram's latest occurrence; 0: empty.
  struct Table {
    std::vector<int32_t> slots;
    int64_t used = 0;
  };

  void reset(int32_t min_n, int32_t max_n);
  // Indexes the n-grams that end at positions [indexed_end_, end) (exclusive ends).
  void index_until(std::span<const int32_t> tokens, int64_t end);
  void insert(Table& table, int32_t n, std::span<const int32_t> tokens, int64_t end) const;
  // The latest exclusive end of an occurrence of tokens[end - n, end) among the indexed ones, or -1.
  int64_t find(const Table& table, int32_t n, std::span<const int32_t> tokens, int64_t end) const;

  int32_t min_n_ = 0, max_n_ = 0;
  int64_t indexed_end_ = 0;
  std::vector<Table> tables_;  // [max_n - min_n + 1], n = min_n + index
};

}  // namespace qinfer
