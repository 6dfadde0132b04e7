// An open-addressing hash map from byte strings to token ids, built once at load and read-only afterwards.
// Keys live in one arena; lookups hash with XXH3. Much faster to build than std::unordered_map<std::string, int>
// for the 150k-entry vocabularies of byte-level BPE models.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

class StringIdMap {
 public:
  void reserve(size_t count);
  // Inserts key → id; returns false (and keeps the old id) when key is already present.
  bool insert(std::string_view key, int32_t id);
  // Inserts key → id, replacing the id when key is already present.
  void insert_or_assign(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  // Calls fn(key, id) for every entry, in no particular order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.id >= 0) fn(std::string_view(arena_.data() + slot.key_offset, slot.key_length), slot.id);
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {             // 16 bytes so more of the table stays in cache
    uint32_t hash_tag = 0;  // high half of the key's hash; the low bits pick the slot
    uint32_t key_offset = 0;
    uint32_t key_length = 0;
    int32_t id = -1;  // -1: empty
  };
  static uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }
  void grow();
  size_t probe(std::string_view key, uint64_t hash) const;

  std::vector<Slot> slots_;  // [power of two]
  std::string arena_;
  size_t count_ = 0;
};

}  // namespace qinfer
