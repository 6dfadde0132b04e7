#include "testing/fake_backend.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "util/error.h"

namespace qinfer::testing {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

[[noreturn]] void malformed(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "fake backend: " + what);
}

// The caller's penalty list must hold the history as sample_token() reads it: distinct tokens (the prompt only under a
// repetition penalty) with their output counts.
void check_penalty_list(const BatchSequence& seq) {
  if (seq.penalty_tokens == nullptr) malformed("a sequence with penalties has no penalty list");
  std::map<int32_t, int32_t> want, got;
  if (seq.sampling->repetition_penalty != 1.0f)
    for (int32_t token : seq.history.prompt) want.emplace(token, 0);
  for (int32_t token : seq.history.output) ++want[token];
  for (const PenaltyTokenCount& e : seq.penalty_tokens->entries())
    if (!got.emplace(e.token, e.output_count).second) malformed("a token twice in the penalty list");
  if (got != want) malformed("the penalty list does not match the history");
}

}  // namespace

uint64_t fake_position_hash(uint64_t previous, int32_t token, int64_t position) {
  return mix64(previous * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(token) * 0x632BE59BD9B4E019ull +
               static_cast<uint64_t>(position));
}

SampleResult fake_sample(uint64_t hash, const SamplingParams& params, uint64_t step, int32_t vocab_size) {
  uint64_t draw = params.greedy() ? hash : mix64(hash ^ mix64(params.seed * 0xD1B54A32D192ED03ull + step));
  SampleResult result;
  result.token = static_cast<int32_t>((draw >> 7) % static_cast<uint64_t>(vocab_size));
  result.logprob = -static_cast<float>((draw >> 3) % 1000) / 100.0f;
  for (int32_t i = 0; i < params.num_top_logprobs; ++i)
    result.top.push_back(
        {static_cast<int32_t>((result.token + i) % vocab_size), result.logprob - static_cast<float>(i)});
  return result;
}

std::vector<int32_t> fake_reference_generate(std::span<const int32_t> prompt, const SamplingParams& params,
                                             const FakeGeneration& generation, const FakeModelSpec& spec) {
  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  uint64_t hash = 0;
  for (size_t p = 0; p < tokens.size(); ++p) hash = fake_position_hash(hash, tokens[p], static_cast<int64_t>(p));
  std::vector<int32_t> output;
  auto contains = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  while (true) {
    int32_t token = fake_sample(hash, params, output.size(), spec.vocab_size).token;
    output.push_back(token);
    tokens.push_back(token);
    if (contains(generation.stop_token_ids, token)) break;
    if (!generation.ignore_eos && contains(spec.eos_token_ids, token)) break;
    if (static_cast<int32_t>(output.size()) >= generation.max_tokens) break;
    if (static_cast<int32_t>(tokens.size()) >= spec.max_model_len) break;
    hash = fake_position_hash(hash, token, static_cast<int64_t>(tokens.size()) - 1);
  }
  return output;
}

FakeBackend::FakeBackend(FakeModelSpec spec) : spec_(std::move(spec)) {
  config_.architecture = "Fake";
  config_.vocab_size = spec_.vocab_size;
  config_.eos_token_ids = spec_.eos_token_ids;
  config_.max_position_embeddings = spec_.max_model_len;
  size_t slots = static_cast<size_t>(spec_.num_blocks) * static_cast<size_t>(spec_.block_size);
  slot_hash_.assign(slots, 0);
  slot_written_.assign(slots, 0);
}

KvCacheShape FakeBackend::kv_cache() const {
  return {spec_.num_blocks, spec_.block_size, int64_t{spec_.num_blocks} * spec_.block_size * 8};
}

void FakeBackend::fail_for_good(const std::string& reason) {
  std::lock_guard lock(failure_mutex_);
  failure_ = reason;
}

std::string FakeBackend::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

void FakeBackend::update_slot_tables(const Batch& batch) {
  const int32_t bs = spec_.block_size;
  std::vector<int32_t> slots;
  for (const BatchSequence& seq : batch.sequences) {
    if (seq.slot == BatchSequence::kNoSlot) continue;
    if (seq.slot < 0) malformed("negative batch slot " + std::to_string(seq.slot));
    if (std::find(slots.begin(), slots.end(), seq.slot) != slots.end())
      malformed("batch slot " + std::to_string(seq.slot) + " given twice");
    slots.push_back(seq.slot);
    if (slot_tables_.size() <= static_cast<size_t>(seq.slot)) slot_tables_.resize(static_cast<size_t>(seq.slot) + 1);
    SlotTable& table = slot_tables_[static_cast<size_t>(seq.slot)];
    const size_t cached_blocks = static_cast<size_t>((seq.num_cached + bs - 1) / bs);
    const size_t blocks = static_cast<size_t>((int64_t{seq.num_cached} + seq.num_tokens + bs - 1) / bs);
    const bool same = table.known && table.generation == seq.table_generation;
    table.blocks.resize(same ? std::min(table.blocks.size(), cached_blocks) : 0);
    table.blocks.insert(table.blocks.end(), seq.block_table.begin() + static_cast<ptrdiff_t>(table.blocks.size()),
                        seq.block_table.begin() + static_cast<ptrdiff_t>(blocks));
    table.known = true;
    table.generation = seq.table_generation;
  }
}

int32_t FakeBackend::kept_block(const BatchSequence& seq, int64_t position) const {
  const size_t column = static_cast<size_t>(position / spec_.block_size);
  if (seq.slot == BatchSequence::kNoSlot) return seq.block_table[column];
  const int32_t kept = slot_tables_[static_cast<size_t>(seq.slot)].blocks[column];
  if (kept != seq.block_table[column])
    malformed("slot " + std::to_string(seq.slot) + " generation " + std::to_string(seq.table_generation) + ": column " +
              std::to_string(column) + " under cached positions changed from block " + std::to_string(kept) + " to " +
              std::to_string(seq.block_table[column]));
  return kept;
}

std::vector<SampleResult> FakeBackend::step(const Batch& batch) {
  if (std::string reason = failure(); !reason.empty()) throw Error(ErrorKind::kUnavailable, "fake backend: " + reason);
  if (fail_next_step_) {
    fail_next_step_ = false;
    throw Error(ErrorKind::kInternal, "fake backend: injected failure");
  }
  ++num_steps_;
  max_batch_sequences_ = std::max(max_batch_sequences_, static_cast<int32_t>(batch.sequences.size()));
  const int32_t bs = spec_.block_size;
  // Blocks each sequence touches in this step; a block used by two sequences must only be read.
  std::unordered_map<int32_t, int32_t> users;
  for (const BatchSequence& seq : batch.sequences) {
    int64_t end = int64_t{seq.num_cached} + seq.num_tokens;
    if (seq.num_tokens <= 0 || seq.num_cached < 0 || end > spec_.max_model_len) malformed("bad token range");
    if (static_cast<int64_t>(seq.block_table.size()) * bs < end) malformed("block table too short");
    for (int64_t b = 0; b < (end + bs - 1) / bs; ++b) {
      int32_t block = seq.block_table[static_cast<size_t>(b)];
      if (block < 0 || block >= spec_.num_blocks) malformed("block id out of range");
      ++users[block];
    }
  }
  update_slot_tables(batch);
  std::vector<SampleResult> results;
  size_t offset = 0;
  for (const BatchSequence& seq : batch.sequences) {
    auto slot = [&](int64_t position) {
      return static_cast<size_t>(seq.block_table[static_cast<size_t>(position / bs)]) * bs + position % bs;
    };
    uint64_t hash = 0;
    if (seq.num_cached > 0) {
      // Cached K/V are read through the slot's kept table, new ones written through the batch's (as on the GPU).
      const int64_t last_cached = seq.num_cached - 1;
      size_t previous = static_cast<size_t>(kept_block(seq, last_cached)) * bs + last_cached % bs;
      if (!slot_written_[previous]) malformed("read of a never-written KV slot");
      hash = slot_hash_[previous];
    }
    for (int32_t i = 0; i < seq.num_tokens; ++i) {
      int64_t position = int64_t{seq.num_cached} + i;
      int32_t token = batch.token_ids.at(offset + static_cast<size_t>(i));
      if (token < 0 || token >= spec_.vocab_size) malformed("token id out of range");
      if (users[seq.block_table[static_cast<size_t>(position / bs)]] > 1) malformed("write into a shared block");
      hash = fake_position_hash(hash, token, position);
      slot_hash_[slot(position)] = hash;
      slot_written_[slot(position)] = 1;
    }
    offset += static_cast<size_t>(seq.num_tokens);
    if (seq.sample && seq.sampling->has_penalties()) check_penalty_list(seq);
    if (seq.sample) results.push_back(fake_sample(hash, *seq.sampling, seq.sample_step, spec_.vocab_size));
  }
  return results;
}

std::vector<float> FakeBackend::forward_logits(const Batch&) {
  throw Error(ErrorKind::kUnsupported, "fake backend has no logits");
}

}  // namespace qinfer::testing
