#include "tokenizer/word_cache.h"

#include "tokenizer/byte_hash.h"

namespace qinfer {

size_t WordCache::PieceHash::operator()(std::string_view piece) const { return hash_bytes(piece); }

bool WordCache::lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const {
  Shard& s = shard(hash);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(piece);
  if (it == s.entries.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) const {
  Shard& s = shard(hash);
  std::lock_guard lock(s.mutex);
  if (s.entries.size() >= kEntriesPerShard) return;
  s.entries.try_emplace(std::string(piece), ids, ids + count);
}

}  // namespace qinfer
