// A deterministic stand-in for the model, for scheduler tests, the property test and the overhead benchmark.
//
// Its "K/V" at position p is a chained hash of every token up to p, stored in the paged cache exactly where the
// block table says; the next token is a function of the hash at the last position. So a wrong block table, a wrong
// num_cached, a stale or overwritten block changes the output, and fake_reference_generate() computes the correct
// tokens straight from the token sequence, without any cache or batching.
//
// Like the CUDA backend it keeps a block table per batch slot that receives only what BatchSequence's contract says
// may change (the entries from a sequence's cached blocks on, or everything on a new generation), and reads the
// cached K/V through that table: a caller that changes a table under cached positions without a new generation is
// refused (the table it kept and the one it sent differ where the step reads).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace qinfer::testing {

struct FakeModelSpec {
  int32_t vocab_size = 512;
  std::vector<int32_t> eos_token_ids = {0};
  int32_t num_blocks = 64;
  int32_t block_size = 4;
  int32_t max_model_len = 256;
};

uint64_t fake_position_hash(uint64_t previous, int32_t token, int64_t position);
SampleResult fake_sample(uint64_t hash, const SamplingParams& params, uint64_t step, int32_t vocab_size);

struct FakeGeneration {
  int32_t max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
};

// The tokens the fake model generates for `prompt`, stopping like the engine does (eos, stop ids, max_tokens,
// max_model_len).
std::vector<int32_t> fake_reference_generate(std::span<const int32_t> prompt, const SamplingParams& params,
                                             const FakeGeneration& generation, const FakeModelSpec& spec);

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(FakeModelSpec spec);

  std::string name() const override { return "fake"; }
  const ModelConfig& config() const override { return config_; }
  KvCacheShape kv_cache() const override;
  int max_model_len() const override { return spec_.max_model_len; }
  // Throws Error(kInvalidArgument) for a malformed batch: short or out-of-range block tables, two sequences writing
  // one block, reads of never-written slots, a negative or repeated batch slot, a slot's table changed under cached
  // positions within one generation.
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

  void fail_next_step() { fail_next_step_ = true; }
  // From now on every step throws and failure() says `reason` (a backend that lost a tensor-parallel rank).
  void fail_for_good(const std::string& reason);
  std::string failure() const override;
  int64_t num_steps() const { return num_steps_; }
  int32_t max_batch_sequences() const { return max_batch_sequences_; }

 private:
  FakeModelSpec spec_;
  ModelConfig config_;
  std::vector<uint64_t> slot_hash_;  // [num_blocks * block_size]: prefix hash ending at the slot's position
  std::vector<uint8_t> slot_written_;
  // Per batch slot (BatchSequence::slot): the generation and block ids its table was last sent with.
  struct SlotTable {
    bool known = false;
    uint64_t generation = 0;
    std::vector<int32_t> blocks;
  };
  std::vector<SlotTable> slot_tables_;
  // Takes what the batch's slotted sequences send into slot_tables_ (O(new blocks) per sequence).
  void update_slot_tables(const Batch& batch);
  // The block holding `position` of `seq` as its slot's table has it (the batch's table for kNoSlot).
  int32_t kept_block(const BatchSequence& seq, int64_t position) const;
  bool fail_next_step_ = false;
  mutable std::mutex failure_mutex_;
  std::string failure_;
  int64_t num_steps_ = 0;
  int32_t max_batch_sequences_ = 0;
};

}  // namespace qinfer::testing
