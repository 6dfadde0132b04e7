// The CUDA backend's device-resident block tables (block_table_slots.h) against the CPU reference, which reads each
// batch's tables as given: sequences with slots decode through captured graphs across block boundaries, a table
// whose released tail blocks are replaced by others, a slot that another sequence takes with a new generation over
// prefix-mapped blocks, rows lent to sequences without a slot, and slots the backend must refuse. In each case a
// device row that missed an update would attend to another sequence's K/V (or none), which the logits show.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "backend/backend.h"
#include "backend/factory.h"
#include "backend/sampling.h"
#include "gpu_test_util.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"
#include "util/error.h"

namespace qinfer {
namespace {

// A sequence as the test drives it: every token fed so far (the first `computed` are in both caches), its table,
// slot and table generation.
struct SlottedSequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;
  int32_t slot = BatchSequence::kNoSlot;
  uint64_t generation = 0;
  int computed = 0;
};

class DeviceBlockTablesTest : public ::testing::TestWithParam<KvCacheDtype> {
 protected:
  static constexpr int kMaxNumSeqs = 4;

  void SetUp() override {
    SKIP_WITHOUT_GPU();
    model_ = std::make_shared<LoadedModel>(make_dummy_model(test_model_preset("tiny"), 7, nullptr));
    BackendOptions o;
    o.kv_cache_dtype = GetParam();
    o.max_model_len = 512;
    o.kv_cache_bytes = int64_t{64} << 20;
    o.max_num_seqs = kMaxNumSeqs;
    o.max_num_batched_tokens = 512;
    o.device = "cpu";
    cpu_ = create_backend(model_, o);
    o.device = "cuda";
    gpu_ = create_backend(model_, o);
    ASSERT_EQ(gpu_->kv_cache().block_size, 16);
  }
  bool fp8() const { return GetParam() == KvCacheDtype::kFp8E4m3; }
  float clear_margin() const { return fp8() ? 0.5f : 0.05f; }

  // Adds `tokens` of `s` to `batch` after its computed ones, sampling after the last.
  void add(Batch& batch, const SlottedSequence& s, std::span<const int32_t> tokens) const {
    batch.token_ids.insert(batch.token_ids.end(), tokens.begin(), tokens.end());
    BatchSequence entry = testing::batch_sequence(static_cast<int>(tokens.size()), s.computed, s.table, &greedy_);
    entry.slot = s.slot;
    entry.table_generation = s.generation;
    batch.sequences.push_back(entry);
  }
  // Feeds the sequences' tokens past `computed` as one batch and checks the GPU's logits against the CPU's.
  void expect_same_logits(std::initializer_list<SlottedSequence*> members, const std::string& what) {
    Batch batch;
    for (SlottedSequence* s : members) add(batch, *s, std::span(s->tokens).subspan(static_cast<size_t>(s->computed)));
    const std::vector<float> cpu = cpu_->forward_logits(batch), gpu = gpu_->forward_logits(batch);
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
    for (size_t r = 0; r < cpu.size() / vocab; ++r) {
      const cuda::testing::RowComparison c = cuda::testing::compare_row(
          std::span(gpu).subspan(r * vocab, vocab), std::span(cpu).subspan(r * vocab, vocab), clear_margin());
      EXPECT_LT(c.relative_error, fp8() ? 6e-2 : 2e-2) << what << " row " << r;
      EXPECT_TRUE(c.argmax_agrees) << what << " row " << r;
    }
    for (SlottedSequence* s : members) s->computed = static_cast<int>(s->tokens.size());
  }
  // Greedy decode through step() (captured graphs): each step's GPU tokens must be the CPU's argmax where it is
  // clear; both backends are fed the GPU's tokens.
  void decode_through_graphs(std::initializer_list<SlottedSequence*> members, int steps) {
    const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
    for (int i = 0; i < steps; ++i) {
      Batch batch;
      for (SlottedSequence* s : members) add(batch, *s, std::span(s->tokens).last(1));
      const std::vector<float> cpu = cpu_->forward_logits(batch);
      const std::vector<SampleResult> gpu = gpu_->step(batch);
      ASSERT_EQ(gpu.size(), members.size());
      size_t r = 0;
      for (SlottedSequence* s : members) {
        const std::span<const float> row = std::span(cpu).subspan(r * vocab, vocab);
        std::vector<float> sorted(row.begin(), row.end());
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        if (sorted[0] - sorted[1] > clear_margin()) {
          EXPECT_EQ(gpu[r].token, std::max_element(row.begin(), row.end()) - row.begin())
              << "decode step " << i << " row " << r;
        }
        s->computed = static_cast<int>(s->tokens.size());
        s->tokens.push_back(gpu[r++].token);
      }
    }
  }

  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> cpu_, gpu_;
  SamplingParams greedy_{.temperature = 0};
};

SlottedSequence slotted(int prompt_tokens, int salt, std::vector<int32_t> table, int32_t slot, uint64_t generation) {
  return {testing::spread_prompt(prompt_tokens, salt), std::move(table), slot, generation, 0};
}

// Two sequences with slots decode 20 tokens through graphs, each crossing two block boundaries: every new block
// reaches the device row in the step that first writes it.
TEST_P(DeviceBlockTablesTest, DecodeThroughGraphsAcrossBlocksMatchesCpu) {
  SlottedSequence a = slotted(46, 1, {0, 1, 2, 3, 4}, 2, 1), b = slotted(29, 2, {10, 11, 12, 13}, 0, 2);
  expect_same_logits({&a, &b}, "prefill");
  a.tokens.push_back(5), b.tokens.push_back(6);
  decode_through_graphs({&a, &b}, 20);
  expect_same_logits({&a, &b}, "after the graphs");
}

// Speculative rejection as the engine does it: a chunk runs into a new block, the positions past num_computed are
// dropped, the block is released and another takes its column in the same generation. The next chunk's attention must
// read the new block, not the rejected tokens' one.
TEST_P(DeviceBlockTablesTest, ReleasedTailBlocksAreReplaced) {
  SlottedSequence a = slotted(67, 3, {0, 1, 2, 3, 4, 5}, 1, 1);
  expect_same_logits({&a}, "prefill");
  const std::vector<int32_t> rejected = testing::spread_prompt(14, 4);  // positions 67..80: block 5 gets 80
  a.tokens.insert(a.tokens.end(), rejected.begin(), rejected.end());
  expect_same_logits({&a}, "chunk into block 5");
  a.computed = 70;
  a.tokens.resize(70);
  a.table[5] = 20;
  const std::vector<int32_t> accepted = testing::spread_prompt(16, 5);  // positions 70..85: block 20 gets 80..85
  a.tokens.insert(a.tokens.end(), accepted.begin(), accepted.end());
  expect_same_logits({&a}, "chunk into the replacing block 20");
  a.tokens.push_back(7);
  decode_through_graphs({&a}, 3);
}

// A slot taken by another sequence with a new generation whose first blocks are mapped from the prefix cache (here
// another sequence's): the device row still holds the previous table, whose first columns differ, so the whole table
// must be sent although those positions count as cached.
TEST_P(DeviceBlockTablesTest, NewGenerationOnAReusedSlotSendsTheWholeTable) {
  SlottedSequence a = slotted(40, 6, {0, 1, 2}, 3, 1), b = slotted(40, 7, {10, 11, 12}, 0, 2);
  expect_same_logits({&a, &b}, "prefill");
  // a finishes; c takes slot 3 with b's first two blocks (b's first 32 tokens) mapped and computes 14 more.
  SlottedSequence c{std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 32), {10, 11, 30, 31}, 3, 3, 32};
  const std::vector<int32_t> rest = testing::spread_prompt(14, 8);
  c.tokens.insert(c.tokens.end(), rest.begin(), rest.end());
  expect_same_logits({&c}, "prefix-mapped chunk in the reused slot");
  c.tokens.push_back(9), b.tokens.push_back(10);
  decode_through_graphs({&b, &c}, 4);
}

// A sequence without a slot borrows a row no sequence of its batch holds and sends its whole table; the sequence
// whose slot that row is must then send its whole table again, though its generation did not change.
TEST_P(DeviceBlockTablesTest, RowsLentToSequencesWithoutSlotsAreSentAgain) {
  SlottedSequence a = slotted(35, 11, {0, 1, 2}, 0, 1), b = slotted(20, 12, {10, 11}, 1, 2);
  expect_same_logits({&a, &b}, "prefill");
  // With only a in the batch the first free row is b's: the slotless d takes it.
  SlottedSequence d = slotted(30, 13, {20, 21}, BatchSequence::kNoSlot, 0);
  a.tokens.push_back(3);
  expect_same_logits({&a, &d}, "decode beside a sequence without a slot");
  b.tokens.push_back(4), a.tokens.push_back(5);
  expect_same_logits({&a, &b}, "b back in its slot");
  b.tokens.push_back(6), a.tokens.push_back(7);
  decode_through_graphs({&a, &b}, 3);
}

TEST_P(DeviceBlockTablesTest, RefusesSlotsOutOfRangeOrRepeated) {
  SlottedSequence a = slotted(20, 14, {0, 1}, 0, 1), b = slotted(20, 15, {10, 11}, 1, 2);
  const auto refused = [&](int32_t slot_a, int32_t slot_b) {
    a.slot = slot_a, b.slot = slot_b;
    Batch batch;
    add(batch, a, a.tokens);
    add(batch, b, b.tokens);
    try {
      gpu_->forward_logits(batch);
    } catch (const Error& e) {
      return e.kind() == ErrorKind::kInvalidArgument && std::string(e.what()).find("slot") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(refused(0, kMaxNumSeqs));
  EXPECT_TRUE(refused(-2, 1));
  EXPECT_TRUE(refused(1, 1));
  a.slot = 0, b.slot = 1;
  expect_same_logits({&a, &b}, "valid slots after the refusals");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DeviceBlockTablesTest, ::testing::Values(KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3),
                         [](const ::testing::TestParamInfo<KvCacheDtype>& info) {
                           return std::string(info.param == KvCacheDtype::kFp8E4m3 ? "fp8" : "bf16");
                         });

}  // namespace
}  // namespace qinfer
