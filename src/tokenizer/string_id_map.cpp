#include "tokenizer/string_id_map.h"

#include "tokenizer/byte_hash.h"

namespace qinfer {

namespace {

// Linear probing stays short up to a load of 0.6; a 150k-entry vocab then fits 2^18 slots (4 MiB).
bool fits(size_t count, size_t slots) { return count * 5 <= slots * 3; }

}  // namespace

void StringIdMap::reserve(size_t count) {
  if (fits(count, slots_.size())) return;
  size_t size = 64;
  while (!fits(count, size)) size *= 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(size, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.id < 0) continue;
    size_t index = hash_bytes(std::string_view(arena_.data() + slot.key_offset, slot.key_length)) & mask;
    while (slots_[index].id >= 0) index = (index + 1) & mask;
    slots_[index] = slot;
  }
}

void StringIdMap::grow() { reserve(count_ + 1 + count_ / 2); }

size_t StringIdMap::probe(std::string_view key, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  size_t index = hash & mask;
  while (true) {
    const Slot& slot = slots_[index];
    if (slot.id < 0) return index;
    if (slot.hash_tag == tag_of(hash) && slot.key_length == key.size() &&
        std::string_view(arena_.data() + slot.key_offset, slot.key_length) == key) {
      return index;
    }
    index = (index + 1) & mask;
  }
}

bool StringIdMap::insert(std::string_view key, int32_t id) {
  if (!fits(count_ + 1, slots_.size())) grow();
  const uint64_t hash = hash_bytes(key);
  Slot& slot = slots_[probe(key, hash)];
  if (slot.id >= 0) return false;
  slot.hash_tag = tag_of(hash);
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
