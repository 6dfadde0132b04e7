#include "tokenizer/string_id_map.h"

#include <bit>

#include "tokenizer/byte_hash.h"

namespace qinfer {

void StringIdMap::reserve(size_t count) {
  if (count * 2 <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::bit_ceil(count * 2 + 16), Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.id < 0) continue;
    size_t index = slot.hash & mask;
    while (slots_[index].id >= 0) index = (index + 1) & mask;
    slots_[index] = slot;
  }
}

void StringIdMap::grow() { reserve(slots_.empty() ? 64 : slots_.size()); }

size_t StringIdMap::probe(std::string_view key, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  size_t index = hash & mask;
  while (true) {
    const Slot& slot = slots_[index];
    if (slot.id < 0) return index;
    if (slot.hash == hash && slot.key_length == key.size() &&
        std::string_view(arena_.data() + slot.key_offset, slot.key_length) == key) {
      return index;
    }
    index = (index + 1) & mask;
  }
}

bool StringIdMap::insert(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t hash = hash_bytes(key);
  Slot& slot = slots_[probe(key, hash)];
  if (slot.id >= 0) return false;
  slot.hash = hash;
  slot.key_offset = static_cast<uint32_t>(arena_.size());
  slot.key_length = static_cast<uint32_t>(key.size());
  slot.id = id;
  arena_.append(key);
  ++count_;
  return true;
}

void StringIdMap::insert_or_assign(std::string_view key, int32_t id) {
  if (insert(key, id)) return;
  slots_[probe(key, hash_bytes(key))].id = id;
}

std::optional<int32_t> StringIdMap::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const Slot& slot = slots_[probe(key, hash_bytes(key))];
  if (slot.id < 0) return std::nullopt;
  return slot.id;
}

}  // namespace qinfer
