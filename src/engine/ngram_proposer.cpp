#include "engine/ngram_proposer.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>

namespace qinfer {

namespace {

uint64_t ngram_hash(std::span<const int32_t> tokens, int64_t end, int32_t n) {
  return XXH3_64bits(tokens.data() + (end - n), static_cast<size_t>(n) * sizeof(int32_t));
}

bool same_ngram(std::span<const int32_t> tokens, int64_t end_a, int64_t end_b, int32_t n) {
  return std::equal(tokens.begin() + (end_a - n), tokens.begin() + end_a, tokens.begin() + (end_b - n));
}

// The latest exclusive end e <= length - 1 of an occurrence of the last n tokens, by scanning; -1 when none.
int64_t scan(std::span<const int32_t> tokens, int32_t n) {
  const int64_t length = static_cast<int64_t>(tokens.size());
  for (int64_t end = length - 1; end >= n; --end)
    if (same_ngram(tokens, end, length, n)) return end;
  return -1;
}

// Token length + j is predicted as the one `shift` earlier; past the end of `tokens` that is an earlier proposal, so
// a short period repeats for all max_tokens.
void continue_match(std::span<const int32_t> tokens, int64_t match_end, int32_t max_tokens, std::vector<int32_t>& out) {
  const int64_t length = static_cast<int64_t>(tokens.size()), shift = length - match_end;
  for (int64_t j = 0; j < max_tokens; ++j) {
    const int64_t source = length + j - shift;
    out.push_back(source < length ? tokens[static_cast<size_t>(source)] : out[static_cast<size_t>(source - length)]);
  }
}

}  // namespace

void NgramIndex::reset(int32_t min_n, int32_t max_n) {
  min_n_ = min_n;
  max_n_ = max_n;
  indexed_end_ = 0;
  tables_.assign(max_n - min_n + 1 <= kMaxIndexedLengths ? static_cast<size_t>(max_n - min_n + 1) : 0, Table{});
}

void NgramIndex::insert(Table& table, int32_t n, std::span<const int32_t> tokens, int64_t end) const {
  if (2 * (table.used + 1) > static_cast<int64_t>(table.slots.size())) {
    std::vector<int32_t> old = std::move(table.slots);
    table.slots.assign(std::max<size_t>(64, 2 * old.size()), 0);
    table.used = 0;
    for (const int32_t slot : old)
      if (slot != 0) insert(table, n, tokens, slot - 1);
  }
  const size_t mask = table.slots.size() - 1;
  for (size_t i = ngram_hash(tokens, end, n) & mask;; i = (i + 1) & mask) {
    int32_t& slot = table.slots[i];
    if (slot == 0) {
      slot = static_cast<int32_t>(end + 1);
      ++table.used;
      return;
    }
    if (same_ngram(tokens, slot - 1, end, n)) {  // a later occurrence of the same n-gram replaces the earlier
      slot = static_cast<int32_t>(std::max<int64_t>(slot - 1, end) + 1);
      return;
    }
  }
}

int64_t NgramIndex::find(const Table& table, int32_t n, std::span<const int32_t> tokens, int64_t end) const {
  if (table.slots.empty()) return -1;
  const size_t mask = table.slots.size() - 1;
  for (size_t i = ngram_hash(tokens, end, n) & mask;; i = (i + 1) & mask) {
    const int32_t slot = table.slots[i];
    if (slot == 0) return -1;
    if (same_ngram(tokens, slot - 1, end, n)) return slot - 1;
  }
}

void NgramIndex::index_until(std::span<const int32_t> tokens, int64_t end) {
  for (; indexed_end_ < end; ++indexed_end_)
    for (int32_t n = min_n_; n <= max_n_ && n <= indexed_end_; ++n)
      insert(tables_[static_cast<size_t>(n - min_n_)], n, tokens, indexed_end_);
}

void NgramIndex::propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
                         std::vector<int32_t>& out) {
  out.clear();
  const int64_t length = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || min_n <= 0 || max_n < min_n) return;
  if (min_n != min_n_ || max_n != max_n_ || length < indexed_end_) reset(min_n, max_n);
  const bool indexed = !tables_.empty();
  // Occurrences that end before the last token, so that at least one token follows them.
  if (indexed) index_until(tokens, length);
  for (int64_t n = std::min<int64_t>(max_n, length - 1); n >= min_n; --n) {
    const int32_t length_n = static_cast<int32_t>(n);
    const int64_t match_end =
        indexed ? find(tables_[static_cast<size_t>(n - min_n)], length_n, tokens, length) : scan(tokens, length_n);
    if (match_end >= 0) {
      continue_match(tokens, match_end, max_tokens, out);
      return;
    }
  }
}

}  // namespace qinfer
