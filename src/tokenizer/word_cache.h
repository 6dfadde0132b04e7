// A bounded, thread-safe cache from a pre-tokenized piece's bytes to its BPE ids (HF keeps one too).
// Lock-free: a fixed table of atomic pointers to immutable entries. A slot is filled once and never replaced, so
// readers only load a pointer and never wait or write shared memory — batch encoding scales with threads. When both
// candidate slots of a piece are taken, the piece is simply not cached (HF likewise stops admitting when full).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

class WordCache {
 public:
  static constexpr size_t kMaxPieceBytes = 64;  // longer pieces are rare repeats; not worth the memory

  WordCache();
  ~WordCache();
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // Appends the cached ids of piece to out and returns true, or returns false on a miss.
  bool lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const;
  // Caches piece → ids if one of its two slots is free; the cache is a memo of a pure function, so it is const.
  void insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) const;

 private:
  struct Entry {
    uint64_t hash;
    std::string piece;
    std::vector<int32_t> ids;
  };
  static constexpr size_t kSlots = size_t{1} << 16;  // ~65k pieces, a few MB at most

  std::unique_ptr<std::atomic<const Entry*>[]> slots_;  // [kSlots]
};

}  // namespace qinfer
