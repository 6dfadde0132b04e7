#include "tokenizer/bpe_model.h"

#include <bit>
#include <queue>

namespace qinfer {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t key) {
  key ^= key >> 29;
  key *= 0x9E3779B97F4A7C15ull;
  return key ^ (key >> 32);
}

// Below this many symbols a linear scan for the best pair beats a heap.
constexpr size_t kSmallPieceSymbols = 48;

}  // namespace

BpeModel::BpeModel(const int32_t (&byte_ids)[256], const std::vector<Merge>& merges, bool ignore_merges,
                   StringIdMap raw_vocab)
    : ignore_merges_(ignore_merges), raw_vocab_(std::move(raw_vocab)) {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = byte_ids[b];
  pairs_.assign(std::bit_ceil(merges.size() * 2 + 16), PairSlot{});
  pair_mask_ = pairs_.size() - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const uint64_t key = pair_key(merges[rank].left, merges[rank].right);
    uint64_t index = mix(key) & pair_mask_;
    while (pairs_[index].key != kEmptyKey && pairs_[index].key != key) index = (index + 1) & pair_mask_;
    // A repeated merge takes its last rank: HF collects the merges into a map, later entries overwriting earlier.
    pairs_[index] = PairSlot{key, static_cast<int32_t>(rank), merges[rank].merged};
  }
}

const BpeModel::PairSlot* BpeModel::find_pair(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  uint64_t index = mix(key) & pair_mask_;
  while (true) {
    const PairSlot& slot = pairs_[index];
    if (slot.key == key) return &slot;
    if (slot.key == kEmptyKey) return nullptr;
    index = (index + 1) & pair_mask_;
  }
}

int32_t BpeModel::pair_rank(int32_t left, int32_t right) const {
  const PairSlot* slot = find_pair(left, right);
  return slot ? slot->rank : kNoRank;
}

void BpeModel::encode_piece(std::string_view piece_bytes, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto id = raw_vocab_.find(piece_bytes)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(piece_bytes.size());
  for (char c : piece_bytes) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id >= 0) symbols.push_back(id);
  }
  if (symbols.size() <= kSmallPieceSymbols) {
    merge_small(symbols);
  } else {
    merge_large(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::merge_small(std::vector<int32_t>& symbols) const {
  if (symbols.size() < 2) return;
  int32_t ranks[kSmallPieceSymbols];  // ranks[i]: rank of the pair (symbols[i], symbols[i + 1])
  size_t n = symbols.size();
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = pair_rank(symbols[i], symbols[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRank) break;
    symbols[best] = find_pair(symbols[best], symbols[best + 1])->merged;
    for (size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) ranks[i] = ranks[i + 1];
    --n;
    if (best > 0) ranks[best - 1] = pair_rank(symbols[best - 1], symbols[best]);
    if (best + 1 < n) ranks[best] = pair_rank(symbols[best], symbols[best + 1]);
  }
  symbols.resize(n);
}

void BpeModel::merge_large(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  // Doubly linked list over symbol positions; a merged-away position is marked dead with id -1.
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (size_t i = 0; i + 1 < n; ++i) {
    const int32_t rank = pair_rank(symbols[i], symbols[i + 1]);
    if (rank != kNoRank) queue.push({rank, static_cast<int32_t>(i)});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int32_t left = top.pos;
    if (symbols[left] < 0 || next[left] < 0) continue;
    const int32_t right = next[left];
    const PairSlot* pair = find_pair(symbols[left], symbols[right]);
    if (pair == nullptr || pair->rank != top.rank) continue;  // stale: one side changed since it was queued
    symbols[left] = pair->merged;
    symbols[right] = -1;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    if (prev[left] >= 0) {
      const int32_t rank = pair_rank(symbols[prev[left]], symbols[left]);
      if (rank != kNoRank) queue.push({rank, prev[left]});
    }
    if (next[left] >= 0) {
      const int32_t rank = pair_rank(symbols[left], symbols[next[left]]);
      if (rank != kNoRank) queue.push({rank, left});
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (symbols[i] >= 0) symbols[kept++] = symbols[i];
  }
  symbols.resize(kept);
}

}  // namespace qinfer
