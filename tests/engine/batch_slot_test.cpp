// The batch slot and table generation the scheduler gives each running sequence (BatchSequence::slot /
// table_generation), which let the CUDA backend keep block tables on the device: slots unique among running
// sequences and handed on after a finish or preemption; a new generation for every table built anew (admission,
// resumption after preemption, prefix-cache or fork mapping), the same one while a table only grows or loses blocks
// past its computed tokens. The fake backend reads cached K/V through the tables it kept per slot, so the harness's
// reference outputs check the contract end to end as well.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "scheduler_harness.h"

namespace qinfer::testing {
namespace {

SchedulerOptions options(int32_t max_num_seqs, int32_t max_num_batched_tokens) {
  SchedulerOptions result;
  result.max_num_seqs = max_num_seqs;
  result.max_num_batched_tokens = max_num_batched_tokens;
  return result;
}

// Every batch of a step: each sequence's slot and generation are the ones its Sequence holds.
void expect_batch_carries_slots(SchedulerHarness& harness) {
  const Batch& batch = harness.scheduler.schedule();
  if (batch.sequences.empty()) return;
  const std::vector<Sequence*> members = harness.scheduler.last_batch_sequences();
  ASSERT_EQ(members.size(), batch.sequences.size());
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(batch.sequences[i].slot, members[i]->slot);
    EXPECT_EQ(batch.sequences[i].table_generation, members[i]->table_generation);
    EXPECT_NE(batch.sequences[i].table_generation, 0u);
  }
  std::vector<SequenceUpdate> updates;
  harness.scheduler.postprocess(harness.backend.step(batch), updates);
}

TEST(BatchSlots, RunningSequencesHoldDistinctSlotsThatFinishedOnesHandOn) {
  SchedulerHarness harness(fake_model(), options(3, 64), true);
  for (int i = 0; i < 7; ++i) harness.add(numbered_prompt(10 * i, 5, 2 + i));
  std::map<int32_t, std::set<uint64_t>> holders;  // slot -> sequences that held it
  for (int step = 0; step < 100 && harness.scheduler.has_work(); ++step) {
    expect_batch_carries_slots(harness);
    EXPECT_EQ(harness.check_invariants(), "");  // slots unique among running sequences, none on the others
    for (const Sequence* seq : harness.scheduler.running()) holders[seq->slot].insert(seq->id);
  }
  EXPECT_FALSE(harness.scheduler.has_work());
  ASSERT_EQ(holders.size(), 3u);
  EXPECT_EQ(holders.begin()->first, 0);
  EXPECT_EQ(holders.rbegin()->first, 2);
  size_t total = 0;
  for (const auto& [slot, ids] : holders) total += ids.size();
  EXPECT_EQ(total, 7u);  // seven sequences through three slots: each reused after a finish
  for (const auto& seq : harness.sequences) EXPECT_EQ(seq->slot, -1);
  expect_reference_outputs(harness);
}

TEST(BatchSlots, APreemptedSequenceResumesWithANewGeneration) {
  // 12 blocks of 4 tokens: four sequences growing to 40 tokens cannot all stay resident.
  SchedulerHarness harness(fake_model(12, 4, 48), options(4, 64), true);
  for (int i = 0; i < 4; ++i) harness.add(numbered_prompt(20 * i, 8, 32));
  std::map<uint64_t, std::vector<uint64_t>> generations;  // sequence -> its generations in order
  std::map<uint64_t, uint64_t> owner;                     // generation -> the one sequence that had it
  bool resumed = false;
  for (int step = 0; step < 1000 && harness.scheduler.has_work(); ++step) {
    harness.step();
    for (const Sequence* seq : harness.scheduler.running()) {
      std::vector<uint64_t>& seen = generations[seq->id];
      if (seen.empty() || seen.back() != seq->table_generation) {
        if (!seen.empty()) {
          EXPECT_GT(seq->num_preemptions, 0) << "a new generation without a new table";
          resumed = true;
        }
        seen.push_back(seq->table_generation);
        EXPECT_TRUE(owner.emplace(seq->table_generation, seq->id).second) << "a generation used twice";
      }
    }
  }
  EXPECT_FALSE(harness.scheduler.has_work());
  EXPECT_GT(harness.scheduler.stats().preemptions, 0u);
  EXPECT_TRUE(resumed);
  expect_reference_outputs(harness);
}

TEST(BatchSlots, APrefixMappedTableGetsItsOwnGeneration) {
  SchedulerHarness harness(fake_model(64, 4), options(8, 64), true);
  Sequence* first = harness.add(numbered_prompt(0, 18, 10));
  harness.step();
  harness.step();
  // The same prompt later: its 4 full blocks are mapped from the prefix cache into a new table.
  Sequence* second = harness.add(numbered_prompt(0, 18, 3));
  harness.step();
  ASSERT_EQ(second->num_cached_prompt_tokens, 16);
  EXPECT_EQ(second->block_table[0], first->block_table[0]);
  EXPECT_NE(second->table_generation, first->table_generation);
  EXPECT_EQ(first->slot, 0);
  EXPECT_EQ(second->slot, 1);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(BatchSlots, AppendingAndReleasingSurplusBlocksKeepTheGeneration) {
  BlockManager blocks(16, 4, true);
  Sequence seq;
  seq.tokens.assign(10, 1);
  seq.num_prompt_tokens = 10;
  blocks.allocate(seq, {}, 10);
  const uint64_t generation = seq.table_generation;
  EXPECT_NE(generation, 0u);
  seq.num_computed = 10;
  blocks.append_slots(seq, 7);  // a verify step's proposals: into two more blocks
  EXPECT_EQ(seq.block_table.size(), 5u);
  blocks.release_surplus_slots(seq);  // all rejected
  EXPECT_EQ(seq.block_table.size(), 3u);
  EXPECT_EQ(seq.table_generation, generation);
  blocks.free(seq);
  blocks.allocate(seq, {}, 10);
  EXPECT_GT(seq.table_generation, generation);
}

}  // namespace
}  // namespace qinfer::testing
