#include "scheduler_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace qinfer::testing {
namespace {

SchedulerOptions with_model_limits(SchedulerOptions options, const FakeModelSpec& model) {
  options.max_model_len = model.max_model_len;
  options.eos_token_ids = model.eos_token_ids;
  return options;
}

}  // namespace

SchedulerHarness::SchedulerHarness(const FakeModelSpec& model, SchedulerOptions options, bool enable_prefix_caching)
    : spec(model),
      backend(model),
      blocks(model.num_blocks, model.block_size, enable_prefix_caching),
      scheduler(with_model_limits(std::move(options), model), blocks) {}

Sequence* SchedulerHarness::add(const SequenceSpec& spec_in) {
  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->tokens = spec_in.prompt;
  seq->num_prompt_tokens = static_cast<int32_t>(spec_in.prompt.size());
  seq->max_tokens = spec_in.max_tokens;
  seq->sampling = spec_in.sampling;
  seq->priority = spec_in.priority;
  seq->ignore_eos = spec_in.ignore_eos;
  seq->stop_token_ids = spec_in.stop_token_ids;
  seq->fork_parent = spec_in.fork_parent;
  Sequence* raw = seq.get();
  sequences.push_back(std::move(seq));
  scheduler.add(raw);
  return raw;
}

size_t SchedulerHarness::step() {
  updates.clear();
  const Batch& batch = scheduler.schedule();
  last_batch_tokens = batch.token_ids.size();
  last_batch_order.clear();
  for (const Sequence* seq : scheduler.last_batch_sequences())
    for (size_t i = 0; i < sequences.size(); ++i)
      if (sequences[i].get() == seq) last_batch_order.push_back(i);
  size_t batch_size = batch.sequences.size();
  EXPECT_LE(batch.token_ids.size(), static_cast<size_t>(scheduler.options().max_num_batched_tokens));
  EXPECT_LE(batch_size, static_cast<size_t>(scheduler.options().max_num_seqs));
  if (batch_size > 0) {
    std::vector<SampleResult> results = backend.step(batch);
    scheduler.postprocess(results, updates);
  }
  std::string problem = check_invariants();
  EXPECT_EQ(problem, "");
  return batch_size;
}

bool SchedulerHarness::run_to_completion(int max_steps) {
  for (int i = 0; i < max_steps && scheduler.has_work(); ++i) step();
  return !scheduler.has_work();
}

std::string SchedulerHarness::check_invariants() const {
  std::vector<const Sequence*> holders(scheduler.running().begin(), scheduler.running().end());
  if (std::string problem = blocks.check_consistency(holders); !problem.empty()) return problem;
  if (scheduler.num_running() > scheduler.options().max_num_seqs) return "more running than max_num_seqs";
  for (const Sequence* seq : scheduler.waiting())
    if (!seq->block_table.empty() || seq->num_computed != 0 || seq->status != SequenceStatus::kWaiting)
      return "waiting sequence " + std::to_string(seq->id) + " holds blocks or computed tokens";
  for (const Sequence* seq : scheduler.running()) {
    if (seq->status != SequenceStatus::kRunning) return "running queue holds a non-running sequence";
    if (static_cast<int32_t>(seq->block_table.size()) != blocks.blocks_for_tokens(seq->num_computed))
      return "running sequence " + std::to_string(seq->id) + " holds " + std::to_string(seq->block_table.size()) +
             " blocks for " + std::to_string(seq->num_computed) + " computed tokens";
    if (seq->num_computed >= seq->num_tokens()) return "running sequence has nothing left to compute";
  }
  for (const auto& seq : sequences)
    if (seq->finished() && !seq->block_table.empty()) return "finished sequence still holds blocks";
  // Batch slots: each running sequence holds one of [0, max_num_seqs), no two the same; the others none.
  std::vector<bool> held(static_cast<size_t>(scheduler.options().max_num_seqs), false);
  for (const auto& seq : sequences) {
    const bool running = seq->status == SequenceStatus::kRunning;
    if (!running && seq->slot != -1) return "sequence " + std::to_string(seq->id) + " holds a slot while not running";
    if (!running) continue;
    if (seq->slot < 0 || seq->slot >= scheduler.options().max_num_seqs || held[static_cast<size_t>(seq->slot)])
      return "running sequence " + std::to_string(seq->id) + " has slot " + std::to_string(seq->slot) +
             ", out of range or held by another";
    held[static_cast<size_t>(seq->slot)] = true;
  }
  return {};
}

std::vector<int32_t> SchedulerHarness::reference_output(const Sequence& seq) const {
  FakeGeneration generation{seq.max_tokens, seq.ignore_eos, seq.stop_token_ids};
  return fake_reference_generate(seq.prompt(), seq.sampling, generation, spec);
}

FakeModelSpec fake_model(int32_t num_blocks, int32_t block_size, int32_t max_model_len) {
  FakeModelSpec spec;
  spec.vocab_size = 512;
  spec.num_blocks = num_blocks;
  spec.block_size = block_size;
  spec.max_model_len = max_model_len;
  return spec;
}

void expect_reference_outputs(const SchedulerHarness& harness) {
  for (const auto& seq : harness.sequences) {
    ASSERT_TRUE(seq->finished());
    EXPECT_EQ(std::vector<int32_t>(seq->output().begin(), seq->output().end()), harness.reference_output(*seq))
        << "sequence " << seq->id;
  }
}

SequenceSpec numbered_prompt(int32_t first, int32_t count, int32_t max_tokens) {
  SequenceSpec spec;
  spec.prompt.resize(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) spec.prompt[static_cast<size_t>(i)] = 1 + (first + i) % 500;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

}  // namespace qinfer::testing
