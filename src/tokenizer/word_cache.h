// A bounded, thread-safe cache from a pre-tokenized piece's bytes to its BPE ids (HF keeps one too). Sharded by hash
// so threads encoding in parallel rarely contend; a full shard stops admitting new pieces (no eviction churn).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qinfer {

class WordCache {
 public:
  static constexpr size_t kMaxPieceBytes = 64;  // longer pieces are rare repeats; not worth the memory

  // Appends the cached ids of piece to out and returns true, or returns false on a miss.
  bool lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) const;

 private:
  static constexpr size_t kShards = 64;
  static constexpr size_t kEntriesPerShard = 2048;
  struct PieceHash {
    using is_transparent = void;  // find() by string_view without building a std::string
    size_t operator()(std::string_view piece) const;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> entries;
  };
  Shard& shard(uint64_t hash) const { return shards_[(hash >> 58) % kShards]; }

  // The cache is a memo of a pure function, so it stays logically const: encode() is const and thread-safe.
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace qinfer
