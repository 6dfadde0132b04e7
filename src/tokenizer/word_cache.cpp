#include "tokenizer/word_cache.h"

namespace qinfer {

WordCache::WordCache() : slots_(new std::atomic<const Entry*>[kSlots]) {
  for (size_t i = 0; i < kSlots; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

WordCache::~WordCache() {
  for (size_t i = 0; i < kSlots; ++i) delete slots_[i].load(std::memory_order_relaxed);
}

bool WordCache::lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const {
  for (size_t probe = 0; probe < 2; ++probe) {
    const Entry* entry = slots_[(hash + probe) & (kSlots - 1)].load(std::memory_order_acquire);
    if (entry == nullptr) return false;
    if (entry->hash == hash && entry->piece == piece) {
      out.insert(out.end(), entry->ids.begin(), entry->ids.end());
      return true;
    }
  }
  return false;
}

void WordCache::insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) const {
  auto entry = std::make_unique<Entry>(Entry{hash, std::string(piece), std::vector<int32_t>(ids, ids + count)});
  for (size_t probe = 0; probe < 2; ++probe) {
    const Entry* expected = nullptr;
    if (slots_[(hash + probe) & (kSlots - 1)].compare_exchange_strong(expected, entry.get(),
                                                                      std::memory_order_acq_rel)) {
      entry.release();  // owned by the table now, freed in the destructor
      return;
    }
    if (expected->hash == hash && expected->piece == piece) return;  // another thread cached it first
  }
}

}  // namespace qinfer
