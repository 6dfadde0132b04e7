// Paged KV-cache bookkeeping: which fixed-size block belongs to which sequence, reference counts for blocks shared
// between sequences, and the prefix cache. Pure CPU bookkeeping: no device memory is touched here.
//
// Prefix cache: once a block is full and its K/V have been computed, it is registered under the chained hash
// hash(parent block's hash, the block's token ids). A later sequence whose leading blocks hash the same maps those
// blocks instead of recomputing them. Blocks nobody references stay registered in an LRU list and are evicted (their
// hash forgotten) only when a fresh block is needed. Blocks are registered only after their K/V are written, so a
// sequence never maps a block whose contents are still being computed in the same step.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace qinfer {

// Chained hash of one full block: XXH3-64 of the token ids, seeded with the parent block's hash (0 for the first).
uint64_t hash_kv_block(uint64_t parent_hash, std::span<const int32_t> block_tokens);

// Blocks a sequence may map instead of computing them, found by match_prefix() or taken from a fork parent.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  int32_t num_unreferenced = 0;    // of `blocks`, those with reference count 0 (they leave the free pool when mapped)
  bool from_prefix_cache = false;  // counted as prefix-cache hits (a fork's shared blocks are not)
  int32_t num_tokens(int32_t block_size) const { return static_cast<int32_t>(blocks.size()) * block_size; }
};

struct BlockManagerStats {
  int64_t prefix_query_tokens = 0;  // prompt tokens of admitted sequences that were looked up
  int64_t prefix_hit_tokens = 0;    // of those, tokens mapped from shared blocks
  int64_t evictions = 0;            // cached blocks whose hash was dropped to reuse the block
};

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks with reference count 0, including cached ones that can be evicted.
  int32_t num_free_blocks() const { return num_free_; }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(hash_to_block_.size()); }
  const BlockManagerStats& stats() const { return stats_; }
  int32_t blocks_for_tokens(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }

  // Extends seq.block_hashes to cover every full block of seq.tokens. Pure function of the tokens.
  void update_block_hashes(Sequence& seq) const;

  // The leading blocks of `seq` (which holds none) found in the prefix cache, leaving at least one token to compute
  // so the last position's logits exist. Does not change any state. Call update_block_hashes first.
  PrefixMatch match_prefix(const Sequence& seq) const;
  // The leading full prompt blocks of `parent` (a running sample of the same request) that `child` can share.
  PrefixMatch match_fork(const Sequence& parent, const Sequence& child) const;

  // Whether `seq` (holding no blocks) can map `match` and get slots for `num_new_tokens` more tokens.
  bool can_allocate(const Sequence& seq, const PrefixMatch& match, int32_t num_new_tokens) const;
  // Maps `match` (reference +1 each), sets seq.num_computed to the matched tokens, then appends slots for
  // `num_new_tokens`. Gives the new table a table_generation no table had before. Counts prefix queries/hits for the
  // first admission of a sequence.
  void allocate(Sequence& seq, const PrefixMatch& match, int32_t num_new_tokens);

  // Whether `seq` can get slots for `num_new_tokens` tokens after its num_computed.
  bool can_append_slots(const Sequence& seq, int32_t num_new_tokens) const;
  // Adds fresh blocks so the block table covers num_computed + num_new_tokens positions.
  void append_slots(Sequence& seq, int32_t num_new_tokens);

  // After a step whose K/V for positions past num_computed are dropped (rejected speculative tokens): releases the
  // blocks beyond ceil(num_computed / block_size), which hold only such positions. Their K/V are never read; the
  // positions inside kept blocks are overwritten when computed again.
  void release_surplus_slots(Sequence& seq);

  // After a step computed more of `seq`: registers its newly full, computed blocks in the prefix cache.
  void register_computed_blocks(Sequence& seq);

  // Draft-model speculation: marks the full blocks of `seq` below seq.speculation.draft_num_computed (which must not
  // exceed num_computed) as holding the draft's K/V of their tokens too. A block keeps the mark until it is handed out
  // again, so a sequence that maps it from the prefix cache (allocate) starts its draft past it: the draft's K/V live
  // under the same block ids as the target's, and equal chained hashes mean equal whole prefixes.
  void mark_draft_computed(Sequence& seq);

  // Releases every block of `seq` (reference -1) and clears its block table and num_computed.
  void free(Sequence& seq);

  // Checks reference counts against the sequences holding blocks, the free list and the hash index. Empty when
  // consistent, else what is wrong. For tests: O(num_blocks).
  std::string check_consistency(std::span<const Sequence* const> holders) const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool hashed = false;
    uint64_t hash = 0;
    int32_t prev_free = -1;  // free list links (LRU order: head is reused first)
    int32_t next_free = -1;
    bool in_free_list = false;
    bool draft_computed = false;  // the draft model's pools hold this block's K/V (mark_draft_computed)
  };

  int32_t take_free_block();
  void push_free_front(int32_t block);
  void push_free_back(int32_t block);
  void unlink_free(int32_t block);

  int32_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  int32_t free_head_ = -1;
  int32_t free_tail_ = -1;
  int32_t num_free_ = 0;
  std::unordered_map<uint64_t, int32_t> hash_to_block_;
  BlockManagerStats stats_;
  uint64_t last_table_generation_ = 0;
};

}  // namespace qinfer
