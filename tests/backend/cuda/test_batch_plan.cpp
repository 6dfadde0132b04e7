// Host-side batch planning of the CUDA backend (no GPU needed): KV slots, block tables, the decode/prefill split,
// sampled rows (every position of a sample_all_positions sequence), penalty entries and the padding of decode and
// verify plans for captured graphs.
#include <gtest/gtest.h>

#include <map>

#include "backend/cuda/batch_plan.h"
#include "testing/batch_test_util.h"

namespace qinfer::cuda {
namespace {

using testing::batch_sequence;

TEST(BatchPlan, MapsTokensToSlotsAndSplitsDecodeFromPrefill) {
  const std::vector<int32_t> table_a = {7, 3, 9}, table_b = {4};
  SamplingParams greedy;
  greedy.temperature = 0;
  Batch batch;
  batch.token_ids = {11, 12, 13, 14};
  // a: 3 new tokens after 30 cached (positions 30..32 cross from block 1 into block 2); b: one decode token.
  batch.sequences = {batch_sequence(3, 30, table_a, nullptr), batch_sequence(1, 5, table_b, &greedy)};
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  EXPECT_EQ(plan.num_tokens, 4);
  EXPECT_EQ(plan.positions, (std::vector<int32_t>{30, 31, 32, 5}));
  EXPECT_EQ(plan.slots, (std::vector<int64_t>{3 * 16 + 14, 3 * 16 + 15, 9 * 16 + 0, 4 * 16 + 5}));
  ASSERT_EQ(plan.tables.size(), 2u);  // each sequence's blocks of its context
  EXPECT_EQ(std::vector<int32_t>(plan.tables[0].begin(), plan.tables[0].end()), table_a);
  EXPECT_EQ(std::vector<int32_t>(plan.tables[1].begin(), plan.tables[1].end()), table_b);
  EXPECT_EQ(plan.prefill_q_starts, (std::vector<int32_t>{0}));
  EXPECT_EQ(plan.prefill_q_lens, (std::vector<int32_t>{3}));
  EXPECT_EQ(plan.prefill_cached_lens, (std::vector<int32_t>{30}));
  EXPECT_EQ(plan.decode_q_rows, (std::vector<int32_t>{3}));
  EXPECT_EQ(plan.decode_table_rows, (std::vector<int32_t>{1}));
  EXPECT_EQ(plan.decode_context_lens, (std::vector<int32_t>{6}));
  EXPECT_EQ(plan.sample_rows, (std::vector<int32_t>{3}));
  EXPECT_FALSE(is_graphable_decode(plan));
}

TEST(BatchPlan, PenaltyEntriesAreDistinctAndIgnoreOutOfVocabularyIds) {
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> prompt = {5, 6, 5, -1}, output = {6, 6, 7, 5000};
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  Batch batch;
  batch.token_ids = {1};
  batch.sequences = {batch_sequence(1, 3, table, &p)};
  batch.sequences[0].history = {prompt, output};
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  ASSERT_EQ(plan.sampling_params.size(), 1u);
  std::map<int32_t, int32_t> counts;
  for (const PenaltyEntry& e : penalty_entries(plan)) EXPECT_TRUE(counts.emplace(e.token, e.output_count).second);
  EXPECT_EQ(counts, (std::map<int32_t, int32_t>{{5, 0}, {6, 2}, {7, 1}}));
  EXPECT_EQ(plan.sampling_params[0].penalty_end - plan.sampling_params[0].penalty_begin, 3);
}

// A row's penalty entries as token -> output count (each token once).
std::map<int32_t, int32_t> row_penalties(const BatchPlan& plan, int row) {
  std::map<int32_t, int32_t> counts;
  const DeviceSamplingParams& d = plan.sampling_params[static_cast<size_t>(row)];
  const std::vector<PenaltyEntry> entries = penalty_entries(plan);
  for (int e = d.penalty_begin; e < d.penalty_end; ++e)
    EXPECT_TRUE(counts.emplace(entries[e].token, entries[e].output_count).second) << "row " << row;
  return counts;
}

// Each row gets its own entries for the tokens it shares with an earlier row, with its own counts; a row without
// penalties in between gets none.
TEST(BatchPlan, PenaltyEntriesArePerRow) {
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> prompt_a = {5, 6}, output_a = {6}, prompt_b = {6, 8}, output_b = {5, 5, 8};
  SamplingParams penalised, plain;
  penalised.repetition_penalty = 1.1f;
  penalised.frequency_penalty = 0.3f;
  Batch batch;
  batch.token_ids = {1, 2, 3};
  batch.sequences = {batch_sequence(1, 3, table, &penalised), batch_sequence(1, 3, table, &plain),
                     batch_sequence(1, 3, table, &penalised)};
  batch.sequences[0].history = {prompt_a, output_a};
  batch.sequences[1].history = {prompt_a, output_a};
  batch.sequences[2].history = {prompt_b, output_b};
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  ASSERT_EQ(plan.sampling_params.size(), 3u);
  EXPECT_EQ(row_penalties(plan, 0), (std::map<int32_t, int32_t>{{5, 0}, {6, 1}}));
  EXPECT_TRUE(row_penalties(plan, 1).empty());
  EXPECT_EQ(row_penalties(plan, 2), (std::map<int32_t, int32_t>{{5, 2}, {6, 0}, {8, 1}}));
}

// A caller's penalty list gives the same entries as walking the history, without ids outside the vocabulary.
TEST(BatchPlan, PenaltyListMatchesTheHistoryWalk) {
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> prompt = {5, 6, 5, -1, 1200}, output = {6, 6, 7, 5000, 9};
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.5f;
  PenaltyTokens tokens(p, prompt);
  for (int32_t t : output) tokens.add_output(t);
  Batch batch;
  batch.token_ids = {1, 2};
  batch.sequences = {batch_sequence(1, 3, table, &p), batch_sequence(1, 3, table, &p)};
  for (BatchSequence& s : batch.sequences) s.history = {prompt, output};
  batch.sequences[1].penalty_tokens = &tokens;
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  EXPECT_EQ(row_penalties(plan, 0), (std::map<int32_t, int32_t>{{5, 0}, {6, 2}, {7, 1}, {9, 1}}));
  EXPECT_EQ(row_penalties(plan, 1), row_penalties(plan, 0));
}

// A caller's list with every id in the vocabulary goes into the upload as it is: the plan views it, copies nothing.
TEST(BatchPlan, PenaltyListWithinTheVocabularyIsViewedNotCopied) {
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> prompt = {5, 6, 5}, output = {6, 7};
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  PenaltyTokens tokens(p, prompt);
  for (int32_t t : output) tokens.add_output(t);
  Batch batch;
  batch.token_ids = {1};
  batch.sequences = {batch_sequence(1, 3, table, &p)};
  batch.sequences[0].history = {prompt, output};
  batch.sequences[0].penalty_tokens = &tokens;
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  ASSERT_EQ(plan.penalty_parts.size(), 1u);
  EXPECT_EQ(static_cast<const void*>(plan.penalty_parts[0].data()), static_cast<const void*>(tokens.entries().data()));
  EXPECT_TRUE(plan.owned_penalties.empty());
  EXPECT_EQ(row_penalties(plan, 0), (std::map<int32_t, int32_t>{{5, 0}, {6, 1}, {7, 1}}));
}

// A sample_all_positions sequence between a decode and a prefill: one sampled row per position in batch order, each
// with the sequence's params, its own Philox step and penalties over the output before it; logit_bias on every row.
TEST(BatchPlan, SampleAllPositionsGivesARowPerPosition) {
  const std::vector<int32_t> table = {0, 1};
  const std::vector<int32_t> prompt = {5, 6}, output = {6, 8, 9};  // 8 and 9 are the two proposals
  const std::vector<LogitBias> bias = {{7, 2.0f}};
  SamplingParams greedy, penalised;
  greedy.temperature = 0;
  penalised.seed = 42;
  penalised.frequency_penalty = 0.5f;
  Batch batch;
  batch.token_ids = {1, 6, 8, 9, 2, 3};
  batch.sequences = {batch_sequence(1, 4, table, &greedy), batch_sequence(3, 10, table, &penalised),
                     batch_sequence(2, 0, table, &greedy)};
  BatchSequence& verify = batch.sequences[1];
  verify.sample_all_positions = true;
  verify.history = {prompt, output};
  verify.sample_step = 1;
  verify.logit_bias = bias;
  ASSERT_EQ(batch.num_sampled(), 5);
  const BatchPlan plan = plan_batch(batch, 16, 1000);
  EXPECT_EQ(plan.sample_rows, (std::vector<int32_t>{0, 1, 2, 3, 5}));
  ASSERT_EQ(plan.sampling_params.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    const DeviceSamplingParams& d = plan.sampling_params[static_cast<size_t>(1 + i)];
    EXPECT_EQ(d.seed, 42u);
    EXPECT_EQ(d.step, static_cast<uint64_t>(1 + i));
    EXPECT_EQ(d.bias_end - d.bias_begin, 1);
  }
  EXPECT_EQ(row_penalties(plan, 1), (std::map<int32_t, int32_t>{{6, 1}}));
  EXPECT_EQ(row_penalties(plan, 2), (std::map<int32_t, int32_t>{{6, 1}, {8, 1}}));
  EXPECT_EQ(row_penalties(plan, 3), (std::map<int32_t, int32_t>{{6, 1}, {8, 1}, {9, 1}}));
  EXPECT_TRUE(row_penalties(plan, 4).empty());
  EXPECT_EQ(plan.num_biases, 3);
  EXPECT_TRUE(plan.constrained());
  EXPECT_FALSE(is_graphable_decode(plan));
  EXPECT_EQ(graphable_chunks(plan).positions, 0);  // a decode and a prefill share the step
}

TEST(BatchPlan, PadsDecodePlansWithScratchRows) {
  const std::vector<int32_t> table_a = {2, 8}, table_b = {5};
  SamplingParams greedy;
  greedy.temperature = 0;
  Batch batch;
  batch.token_ids = {1, 2, 3};
  batch.sequences = {batch_sequence(1, 20, table_a, &greedy), batch_sequence(1, 0, table_b, &greedy),
                     batch_sequence(1, 7, table_b, &greedy)};
  BatchPlan plan = plan_batch(batch, 16, 1000);
  ASSERT_TRUE(is_graphable_decode(plan));
  pad_decode_plan(plan, 4, 99, 16);
  EXPECT_EQ(plan.num_tokens, 4);
  EXPECT_EQ(plan.token_ids.size(), 4u);
  EXPECT_EQ(plan.tables.size(), 3u);  // the padding row reads the scratch table row (map_table_rows)
  EXPECT_EQ(plan.decode_table_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.slots.back(), 99 * 16);
  EXPECT_EQ(plan.decode_context_lens, (std::vector<int32_t>{21, 1, 8, 1}));
  EXPECT_EQ(plan.decode_q_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.sample_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(plan.sampling_params.size(), 4u);
  EXPECT_EQ(plan.sampling_params[3].temperature, 0.0f);
  EXPECT_EQ(plan.sampling_params[3].penalty_begin, plan.sampling_params[3].penalty_end);
}

// Steps of equal chunks are graphable when every sequence computes the same number of positions and samples all of
// them (verification) or only its last (a draft catching up, up to kMaxGraphedLastRowChunk positions).
TEST(BatchPlan, EqualChunksAreGraphable) {
  const std::vector<int32_t> table_a = {2, 8}, table_b = {5, 6};
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {1, 2}, output = {3, 4, 5};
  Batch batch;
  batch.token_ids = {3, 4, 5, 7, 8, 9};
  batch.sequences = {batch_sequence(3, 20, table_a, &greedy), batch_sequence(3, 9, table_b, &greedy)};
  for (BatchSequence& s : batch.sequences) {
    s.sample_all_positions = true;
    s.history = {prompt, output};
  }
  GraphableChunks chunks = graphable_chunks(plan_batch(batch, 16, 1000));
  EXPECT_EQ(chunks.positions, 3);
  EXPECT_TRUE(chunks.all_sampled);
  batch.sequences[1].sample_all_positions = false;  // one verifies, the other samples its last row: mixed
  EXPECT_EQ(graphable_chunks(plan_batch(batch, 16, 1000)).positions, 0);
  batch.sequences[0].sample_all_positions = false;  // both sample their last row
  chunks = graphable_chunks(plan_batch(batch, 16, 1000));
  EXPECT_EQ(chunks.positions, 3);
  EXPECT_FALSE(chunks.all_sampled);
  batch.sequences[1].sample = false;  // a sequence that samples nothing
  EXPECT_EQ(graphable_chunks(plan_batch(batch, 16, 1000)).positions, 0);
  batch.sequences[1].sample = true;
  batch.token_ids.pop_back();
  batch.sequences[1].num_tokens = 2;  // 3 and 2 positions
  EXPECT_EQ(graphable_chunks(plan_batch(batch, 16, 1000)).positions, 0);
  // A long chunk sampling its last row is a prompt chunk, not graphed.
  Batch prompt_batch;
  prompt_batch.token_ids.assign(kMaxGraphedLastRowChunk + 1, 7);
  prompt_batch.sequences = {batch_sequence(kMaxGraphedLastRowChunk + 1, 0, table_a, &greedy)};
  EXPECT_EQ(graphable_chunks(plan_batch(prompt_batch, 16, 1000)).positions, 0);
}

TEST(BatchPlan, PadsEqualChunkPlansWithScratchSequences) {
  const std::vector<int32_t> table_a = {2, 8};
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {1, 2}, output = {3, 4, 5};
  Batch batch;
  batch.token_ids = {3, 4, 5};
  batch.sequences = {batch_sequence(3, 20, table_a, &greedy)};
  batch.sequences[0].sample_all_positions = true;
  batch.sequences[0].history = {prompt, output};
  for (const bool all_sampled : {true, false}) {
    batch.sequences[0].sample_all_positions = all_sampled;
    BatchPlan plan = plan_batch(batch, 16, 1000);
    ASSERT_EQ(graphable_chunks(plan).positions, 3);
    pad_chunk_plan(plan, 2, 99, 16, all_sampled);
    EXPECT_EQ(plan.num_tokens, 6);
    EXPECT_EQ(plan.token_ids.size(), 6u);
    EXPECT_EQ(plan.tables.size(), 1u);
    EXPECT_EQ(std::vector<int32_t>(plan.positions.begin() + 3, plan.positions.end()), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(std::vector<int64_t>(plan.slots.begin() + 3, plan.slots.end()),
              (std::vector<int64_t>{99 * 16, 99 * 16 + 1, 99 * 16 + 2}));
    EXPECT_EQ(plan.prefill_table_rows, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(plan.prefill_q_starts, (std::vector<int32_t>{0, 3}));
    EXPECT_EQ(plan.prefill_q_lens, (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(plan.prefill_cached_lens, (std::vector<int32_t>{20, 0}));
    EXPECT_EQ(plan.sample_rows, all_sampled ? (std::vector<int32_t>{0, 1, 2, 3, 4, 5}) : (std::vector<int32_t>{2, 5}));
    ASSERT_EQ(plan.sampling_params.size(), all_sampled ? 6u : 2u);
    EXPECT_EQ(plan.sampling_params.back().temperature, 0.0f);
    EXPECT_EQ(plan.max_prefill_q_len, 3);
    EXPECT_TRUE(plan.decode_q_rows.empty());
  }
}

}  // namespace
}  // namespace qinfer::cuda
