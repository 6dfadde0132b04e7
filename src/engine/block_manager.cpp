#include "engine/block_manager.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/error.h"

namespace qinfer {

uint64_t hash_kv_block(uint64_t parent_hash, std::span<const int32_t> block_tokens) {
  return XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), parent_hash);
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  if (num_blocks <= 0 || block_size <= 0)
    throw Error(ErrorKind::kInvalidArgument, "KV cache needs at least one block of at least one token, got " +
                                                 std::to_string(num_blocks) + " blocks of " +
                                                 std::to_string(block_size));
  blocks_.resize(static_cast<size_t>(num_blocks));
  for (int32_t b = 0; b < num_blocks; ++b) push_free_back(b);
  num_free_ = num_blocks;
}

void BlockManager::update_block_hashes(Sequence& seq) const {
  size_t num_full = seq.tokens.size() / static_cast<size_t>(block_size_);
  for (size_t i = seq.block_hashes.size(); i < num_full; ++i) {
    uint64_t parent = i == 0 ? 0 : seq.block_hashes[i - 1];
    std::span<const int32_t> block(seq.tokens.data() + i * block_size_, static_cast<size_t>(block_size_));
    seq.block_hashes.push_back(hash_kv_block(parent, block));
  }
}

PrefixMatch BlockManager::match_prefix(const Sequence& seq) const {
  PrefixMatch match;
  match.from_prefix_cache = true;
  if (!prefix_caching_ || seq.num_tokens() == 0) return match;
  size_t max_blocks = std::min(static_cast<size_t>((seq.num_tokens() - 1) / block_size_), seq.block_hashes.size());
  for (size_t i = 0; i < max_blocks; ++i) {
    auto it = hash_to_block_.find(seq.block_hashes[i]);
    if (it == hash_to_block_.end()) break;
    match.blocks.push_back(it->second);
    if (blocks_[it->second].ref_count == 0) ++match.num_unreferenced;
  }
  return match;
}

PrefixMatch BlockManager::match_fork(const Sequence& parent, const Sequence& child) const {
  PrefixMatch match;
  int32_t shareable_tokens = std::min({parent.num_computed, parent.num_prompt_tokens, child.num_tokens() - 1});
  size_t num_shared =
      std::min(static_cast<size_t>(std::max(shareable_tokens, 0) / block_size_), parent.block_table.size());
  match.blocks.assign(parent.block_table.begin(), parent.block_table.begin() + static_cast<ptrdiff_t>(num_shared));
  return match;
}

bool BlockManager::can_allocate(const Sequence& seq, const PrefixMatch& match, int32_t num_new_tokens) const {
  QINFER_CHECK(seq.block_table.empty(), "allocate is for sequences holding no blocks");
  int64_t total_blocks = blocks_for_tokens(int64_t{match.num_tokens(block_size_)} + num_new_tokens);
  int64_t fresh_blocks = total_blocks - static_cast<int64_t>(match.blocks.size());
  return fresh_blocks + match.num_unreferenced <= num_free_;
}

void BlockManager::allocate(Sequence& seq, const PrefixMatch& match, int32_t num_new_tokens) {
  QINFER_CHECK(can_allocate(seq, match, num_new_tokens));
  for (int32_t block : match.blocks) {
    Block& meta = blocks_[block];
    if (meta.ref_count == 0) {
      unlink_free(block);
      --num_free_;
    }
    ++meta.ref_count;
    seq.block_table.push_back(block);
  }
  seq.num_computed = match.num_tokens(block_size_);
  seq.num_registered_blocks = static_cast<int32_t>(match.blocks.size());
  seq.table_generation = ++last_table_generation_;
  // The draft's K/V come with the leading matched blocks that hold them.
  int32_t draft_blocks = 0;
  while (draft_blocks < static_cast<int32_t>(match.blocks.size()) &&
         blocks_[match.blocks[static_cast<size_t>(draft_blocks)]].draft_computed)
    ++draft_blocks;
  seq.speculation.draft_num_computed = std::min(seq.num_computed, draft_blocks * block_size_);
  seq.speculation.draft_marked_blocks = draft_blocks;
  if (!seq.admitted_before && match.from_prefix_cache && prefix_caching_) {
    stats_.prefix_query_tokens += seq.num_prompt_tokens;
    stats_.prefix_hit_tokens += std::min(seq.num_computed, seq.num_prompt_tokens);
  }
  append_slots(seq, num_new_tokens);
}

bool BlockManager::can_append_slots(const Sequence& seq, int32_t num_new_tokens) const {
  int64_t needed =
      blocks_for_tokens(int64_t{seq.num_computed} + num_new_tokens) - static_cast<int64_t>(seq.block_table.size());
  return needed <= num_free_;
}

void BlockManager::append_slots(Sequence& seq, int32_t num_new_tokens) {
  QINFER_CHECK(can_append_slots(seq, num_new_tokens));
  int32_t needed = blocks_for_tokens(int64_t{seq.num_computed} + num_new_tokens);
  while (static_cast<int32_t>(seq.block_table.size()) < needed) seq.block_table.push_back(take_free_block());
}

void BlockManager::release_surplus_slots(Sequence& seq) {
  const size_t kept = static_cast<size_t>(blocks_for_tokens(seq.num_computed));
  while (seq.block_table.size() > kept) {
    const int32_t block = seq.block_table.back();
    Block& meta = blocks_[block];
    // Surplus blocks were taken fresh for this sequence alone and never registered.
    QINFER_CHECK(meta.ref_count == 1 && !meta.hashed, "a surplus block is shared or cached");
    meta.ref_count = 0;
    ++num_free_;
    push_free_front(block);
    seq.block_table.pop_back();
  }
}

void BlockManager::register_computed_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  int32_t num_full = seq.num_computed / block_size_;
  if (num_full <= seq.num_registered_blocks) return;
  update_block_hashes(seq);
  for (int32_t i = seq.num_registered_blocks; i < num_full; ++i) {
    Block& meta = blocks_[seq.block_table[i]];
    if (meta.hashed) continue;
    uint64_t hash = seq.block_hashes[i];
    // Another block may already hold the same content (computed concurrently); keep that one registered.
    if (hash_to_block_.emplace(hash, seq.block_table[i]).second) {
      meta.hashed = true;
      meta.hash = hash;
    }
  }
  seq.num_registered_blocks = num_full;
}

void BlockManager::mark_draft_computed(Sequence& seq) {
  SpeculationState& spec = seq.speculation;
  QINFER_CHECK(spec.draft_num_computed <= seq.num_computed, "the draft is marked past the target's computed tokens");
  const int32_t full = spec.draft_num_computed / block_size_;
  for (; spec.draft_marked_blocks < full; ++spec.draft_marked_blocks)
    blocks_[seq.block_table[static_cast<size_t>(spec.draft_marked_blocks)]].draft_computed = true;
}

void BlockManager::free(Sequence& seq) {
  // Last blocks first, so that a sequence's tail is evicted before its (more shareable) head.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& meta = blocks_[*it];
    QINFER_CHECK(meta.ref_count > 0, "block freed more often than mapped");
    if (--meta.ref_count > 0) continue;
    ++num_free_;
    if (meta.hashed)
      push_free_back(*it);  // stays cached; most recently used
    else
      push_free_front(*it);  // holds nothing reusable: hand it out first
  }
  seq.block_table.clear();
  seq.speculation.draft_num_computed = 0;  // the draft's K/V lived in the same blocks
  seq.speculation.draft_marked_blocks = 0;
  seq.num_computed = 0;
  seq.num_registered_blocks = 0;
}

int32_t BlockManager::take_free_block() {
  QINFER_CHECK(free_head_ >= 0, "no free KV block; callers check can_append_slots first");
  int32_t block = free_head_;
  unlink_free(block);
  --num_free_;
  Block& meta = blocks_[block];
  if (meta.hashed) {
    hash_to_block_.erase(meta.hash);
    meta.hashed = false;
    ++stats_.evictions;
  }
  meta.ref_count = 1;
  meta.draft_computed = false;  // its next K/V are the new holder's, the draft's not yet
  return block;
}

void BlockManager::push_free_front(int32_t block) {
  Block& meta = blocks_[block];
  meta.prev_free = -1;
  meta.next_free = free_head_;
  if (free_head_ >= 0) blocks_[free_head_].prev_free = block;
  free_head_ = block;
  if (free_tail_ < 0) free_tail_ = block;
  meta.in_free_list = true;
}

void BlockManager::push_free_back(int32_t block) {
  Block& meta = blocks_[block];
  meta.next_free = -1;
  meta.prev_free = free_tail_;
  if (free_tail_ >= 0) blocks_[free_tail_].next_free = block;
  free_tail_ = block;
  if (free_head_ < 0) free_head_ = block;
  meta.in_free_list = true;
}

void BlockManager::unlink_free(int32_t block) {
  Block& meta = blocks_[block];
  QINFER_CHECK(meta.in_free_list);
  if (meta.prev_free >= 0)
    blocks_[meta.prev_free].next_free = meta.next_free;
  else
    free_head_ = meta.next_free;
  if (meta.next_free >= 0)
    blocks_[meta.next_free].prev_free = meta.prev_free;
  else
    free_tail_ = meta.prev_free;
  meta.prev_free = meta.next_free = -1;
  meta.in_free_list = false;
}

std::string BlockManager::check_consistency(std::span<const Sequence* const> holders) const {
  std::vector<int32_t> expected_refs(blocks_.size(), 0);
  for (const Sequence* seq : holders)
    for (int32_t block : seq->block_table) {
      if (block < 0 || block >= num_blocks()) return "block id " + std::to_string(block) + " out of range";
      ++expected_refs[block];
    }
  int32_t zero_refs = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].ref_count != expected_refs[b])
      return "block " + std::to_string(b) + " has ref count " + std::to_string(blocks_[b].ref_count) + ", " +
             std::to_string(expected_refs[b]) + " sequences hold it";
    if (blocks_[b].in_free_list != (blocks_[b].ref_count == 0))
      return "block " + std::to_string(b) + " free-list membership disagrees with its ref count";
    if (blocks_[b].ref_count == 0) ++zero_refs;
    if (blocks_[b].hashed) {
      auto it = hash_to_block_.find(blocks_[b].hash);
      if (it == hash_to_block_.end() || it->second != static_cast<int32_t>(b))
        return "hashed block " + std::to_string(b) + " missing from the prefix index";
    }
  }
  if (zero_refs != num_free_) return "free count " + std::to_string(num_free_) + " != " + std::to_string(zero_refs);
  int32_t walked = 0;
  for (int32_t b = free_head_; b >= 0; b = blocks_[b].next_free)
    if (++walked > num_blocks()) return "free list has a cycle";
  if (walked != num_free_) return "free list length " + std::to_string(walked) + " != " + std::to_string(num_free_);
  for (const auto& [hash, block] : hash_to_block_)
    if (!blocks_[block].hashed || blocks_[block].hash != hash) return "prefix index entry points to a stale block";
  return {};
}

}  // namespace qinfer
