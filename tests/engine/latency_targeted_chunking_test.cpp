// Latency-targeted chunking (SchedulerOptions::target_step_ms, EngineOptions::target_itl_ms): the engine over a fake
// backend whose step time follows a known cost model and advances the engine's injected clock, with a 128K prompt
// arriving beside 32 decoding chats; and the scheduler's interplay with the partial-prefill limits and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/engine.h"
#include "engine/prefill_cost.h"
#include "engine/step_time_model.h"
#include "model/test_model.h"
#include "scheduler_harness.h"
#include "testing/fake_backend.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

constexpr double kTargetMs = 50;
constexpr int32_t kBudget = 8192;
constexpr int32_t kLongPrompt = 131072;
constexpr int32_t kNumChats = 32;

// The fake GPU: a fixed part per step, a part per decode, and prefill work at a fixed price per PrefillCost unit (the
// H200's for Qwen3-4B: a fresh 8 192-token chunk ≈ 155 ms).
struct StepCostModel {
  double fixed_ms = 3;
  double per_decode_ms = 0.15;
  double ms_per_cost = 0.014;
  PrefillCost cost{0};

  double step_ms(const Batch& batch) const {
    double ms = fixed_ms;
    for (const BatchSequence& s : batch.sequences)
      ms += s.num_tokens == 1 ? per_decode_ms : ms_per_cost * cost.cost(s.num_tokens, s.num_cached);
    return ms;
  }
};

struct StepRecord {
  double ms = 0;
  int32_t decodes = 0;
  int32_t prefill_tokens = 0;
};

// The fake backend with the Qwen3-4B shape's cost ratio and a clock that each step advances by the cost model.
class TimedFakeBackend final : public Backend {
 public:
  explicit TimedFakeBackend(FakeModelSpec spec) : fake_(spec), config_(test_model_preset("4b-shape")) {
    config_.architecture = fake_.config().architecture;
    config_.vocab_size = fake_.config().vocab_size;
    config_.eos_token_ids = fake_.config().eos_token_ids;
    config_.max_position_embeddings = fake_.config().max_position_embeddings;
    model_.cost = PrefillCost(prefill_attention_cost_ratio(config_));
  }

  std::string name() const override { return "timed fake"; }
  const ModelConfig& config() const override { return config_; }
  KvCacheShape kv_cache() const override { return fake_.kv_cache(); }
  int max_model_len() const override { return fake_.max_model_len(); }
  std::vector<SampleResult> step(const Batch& batch) override {
    StepRecord record;
    record.ms = model_.step_ms(batch);
    for (const BatchSequence& s : batch.sequences) {
      if (s.num_tokens == 1) {
        ++record.decodes;
      } else {
        record.prefill_tokens += s.num_tokens;
      }
    }
    steps.push_back(record);
    now += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(record.ms));
    return fake_.step(batch);
  }
  std::vector<float> forward_logits(const Batch& batch) override { return fake_.forward_logits(batch); }

  const StepCostModel& model() const { return model_; }

  Clock::time_point now{};
  std::vector<StepRecord> steps;

 private:
  FakeBackend fake_;
  ModelConfig config_;
  StepCostModel model_;
};

FakeModelSpec long_context_model() {
  FakeModelSpec spec;
  spec.block_size = 16;
  spec.num_blocks = 10000;
  spec.max_model_len = 140000;
  return spec;
}

GenerationRequest request_of(int32_t first, int32_t length, int32_t max_tokens) {
  GenerationRequest request;
  request.prompt.resize(static_cast<size_t>(length));
  for (int32_t i = 0; i < length; ++i) request.prompt[static_cast<size_t>(i)] = 1 + (first + i) % 500;
  request.sampling.temperature = 0;
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  return request;
}

// The engine over the timed fake backend (its clock the backend's), 64 seats and the default token budget.
struct TimedEngine {
  explicit TimedEngine(double target_ms) : engine(backend, options(backend, target_ms)) {}

  // Submits `chats` short chats and runs their prompts and a few decode-only steps.
  std::vector<RequestHandle> start_chats(int32_t chats) {
    std::vector<RequestHandle> handles;
    for (int32_t i = 0; i < chats; ++i) handles.push_back(engine.submit(request_of(20 * i + 3, 16, 2000)));
    for (int i = 0; i < 8 && chats > 0; ++i) EXPECT_TRUE(engine.step());
    return handles;
  }

  TimedFakeBackend backend{long_context_model()};
  Engine engine;

 private:
  static EngineOptions options(TimedFakeBackend& backend, double target_ms) {
    EngineOptions options;
    options.max_num_seqs = 64;
    options.max_num_batched_tokens = kBudget;
    options.target_itl_ms = target_ms;
    options.clock = [&backend] { return backend.now; };
    return options;
  }
};

struct LongPromptRun {
  double ttft_ms = 0;                 // from its submission to its first token, on the fake clock
  std::vector<StepRecord> during;     // the steps from its submission to its first token
  std::vector<int32_t> chat_outputs;  // tokens each chat had when the long prompt got its first token
  uint64_t latency_limited_chunks = 0;
};

// A 128K prompt alone (chats = 0) or beside `chats` decoding chats.
LongPromptRun run_long_prompt(int32_t chats, double target_ms) {
  TimedEngine timed(target_ms);
  TimedFakeBackend& backend = timed.backend;
  Engine& engine = timed.engine;
  std::vector<RequestHandle> chat_handles = timed.start_chats(chats);
  const size_t first_step = backend.steps.size();
  const Clock::time_point submitted = backend.now;
  RequestHandle document = engine.submit(request_of(7000, kLongPrompt, 1));
  LongPromptRun run;
  std::vector<StreamDelta> deltas;
  while (deltas.empty()) {
    if (!engine.step()) {
      ADD_FAILURE() << "the engine stopped before the long prompt's first token";
      return run;
    }
    document.stream->wait_drain(deltas, std::chrono::milliseconds(0));
  }
  run.ttft_ms = std::chrono::duration<double, std::milli>(backend.now - submitted).count();
  run.during.assign(backend.steps.begin() + static_cast<ptrdiff_t>(first_step), backend.steps.end());
  for (RequestHandle& chat : chat_handles) {
    std::vector<StreamDelta> out;
    chat.stream->wait_drain(out, std::chrono::milliseconds(0));
    int32_t tokens = 0;
    for (const StreamDelta& delta : out) tokens += static_cast<int32_t>(delta.token_ids.size());
    run.chat_outputs.push_back(tokens);
  }
  run.latency_limited_chunks = engine.stats().scheduler.latency_limited_chunks;
  return run;
}

TEST(LatencyTargetedChunking, ALongPromptBesideChatsKeepsEveryStepWithinTheTarget) {
  const LongPromptRun alone = run_long_prompt(0, kTargetMs);
  const LongPromptRun mixed = run_long_prompt(kNumChats, kTargetMs);
  ASSERT_FALSE(alone.during.empty());
  ASSERT_FALSE(mixed.during.empty());
  EXPECT_EQ(alone.during.front().prefill_tokens, kBudget) << "no decodes: the whole token budget";
  EXPECT_EQ(alone.latency_limited_chunks, 0u);
  // The model starts from its conservative prior and learns from the first mixed steps; from then on every step
  // stays within the target.
  constexpr size_t kCalibrationSteps = 3;
  ASSERT_GT(mixed.during.size(), kCalibrationSteps + 10);
  for (size_t i = 0; i < mixed.during.size(); ++i) {
    EXPECT_EQ(mixed.during[i].decodes, kNumChats) << "every chat decodes in step " << i;
    if (i >= kCalibrationSteps) {
      EXPECT_LE(mixed.during[i].ms, kTargetMs) << "step " << i;
    }
  }
  const double max_ms =
      std::max_element(mixed.during.begin(), mixed.during.end(), [](auto& a, auto& b) { return a.ms < b.ms; })->ms;
  EXPECT_GT(max_ms, 0.8 * kTargetMs) << "the target is used, not undershot";
  EXPECT_LE(mixed.ttft_ms, 1.3 * alone.ttft_ms) << "alone " << alone.ttft_ms << " ms";
  EXPECT_GT(mixed.latency_limited_chunks, 0u);
  RecordProperty("ttft_alone_ms", std::to_string(alone.ttft_ms));
  RecordProperty("ttft_beside_chats_ms", std::to_string(mixed.ttft_ms));
  RecordProperty("steps_beside_chats", std::to_string(mixed.during.size()));
  RecordProperty("max_step_ms", std::to_string(max_ms));
  // Each chat got one token per step while the document was prefilled (plus those of the steps before it).
  for (int32_t tokens : mixed.chat_outputs) EXPECT_GE(tokens, static_cast<int32_t>(mixed.during.size()));
}

TEST(LatencyTargetedChunking, AChatArrivingBesideADocumentGetsItsFirstTokenWithinAFewSteps) {
  TimedEngine timed(kTargetMs);
  TimedFakeBackend& backend = timed.backend;
  Engine& engine = timed.engine;
  timed.start_chats(kNumChats);
  RequestHandle document = engine.submit(request_of(7000, kLongPrompt, 1));
  for (int i = 0; i < 170; ++i) engine.step();  // about 100K tokens of the document are cached
  const Clock::time_point submitted = backend.now;
  const size_t first_step = backend.steps.size();
  RequestHandle chat = engine.submit(request_of(9001, 2000, 4));
  std::vector<StreamDelta> deltas;
  int steps = 0;
  while (deltas.empty() && steps < 100) {
    engine.step();
    ++steps;
    chat.stream->wait_drain(deltas, std::chrono::milliseconds(0));
  }
  EXPECT_LE(steps, 3) << "a 2K prompt beside a 128K one";
  // At most the admitted chat's minimum chunk on top of the target; the document's minimum (≈ 40 ms of attention
  // this deep into it) is never added to another chunk.
  const double chat_minimum_ms = backend.model().ms_per_cost * backend.model().cost.cost(256, 0);
  for (size_t i = first_step; i < backend.steps.size(); ++i)
    EXPECT_LE(backend.steps[i].ms, kTargetMs + chat_minimum_ms) << "step " << i - first_step << " of the chat";
  const double ttft_ms = std::chrono::duration<double, std::milli>(backend.now - submitted).count();
  EXPECT_LE(ttft_ms, 3 * kTargetMs);
  std::vector<StreamDelta> document_deltas;
  document.stream->wait_drain(document_deltas, std::chrono::milliseconds(0));
  EXPECT_TRUE(document_deltas.empty()) << "the document was still in its prompt";
}

TEST(LatencyTargetedChunking, OffChunksByTokenBudgetAndCostAsBefore) {
  const LongPromptRun off = run_long_prompt(kNumChats, 0);
  ASSERT_FALSE(off.during.empty());
  EXPECT_EQ(off.latency_limited_chunks, 0u);
  EXPECT_EQ(off.during.front().prefill_tokens, kBudget - kNumChats) << "the budget left beside the decodes";
  const double max_ms =
      std::max_element(off.during.begin(), off.during.end(), [](auto& a, auto& b) { return a.ms < b.ms; })->ms;
  EXPECT_GT(max_ms, 3 * kTargetMs) << "what the target is for: a fresh 8K chunk stalls every decode";
}

TEST(StepTimeModel, LearnsTheDecodePartAndThePricePerCostUnit) {
  StepTimeModel model;
  EXPECT_DOUBLE_EQ(model.ms_per_cost(), 0.05) << "the prior";
  EXPECT_DOUBLE_EQ(model.prefill_budget(50), 50 / 0.05);
  for (int i = 0; i < 5; ++i) model.observe(0, true, 8);
  EXPECT_DOUBLE_EQ(model.decode_ms(), 8);
  for (int i = 0; i < 40; ++i) model.observe(2000, true, 8 + 0.01 * 2000);
  EXPECT_NEAR(model.ms_per_cost(), 0.01, 1e-4);
  EXPECT_NEAR(model.prefill_budget(50), 4200, 50);
  EXPECT_NEAR(model.predict_ms(1000, true), 18, 0.1);
  model.observe(4, false, 1e9);  // too little prefill work to tell anything, and no decodes
  EXPECT_NEAR(model.ms_per_cost(), 0.01, 1e-4);
  // One step 40 times too slow (a graph captured, a GEMM tuned) moves the estimates by a bounded amount.
  model.observe(0, true, 320);
  EXPECT_LE(model.decode_ms(), 0.8 * 8 + 0.2 * 4 * 8 + 1e-9);
  model.observe(2000, true, 8 + 0.4 * 2000);
  EXPECT_LT(model.ms_per_cost(), 0.02);
  for (int i = 0; i < 40; ++i) {
    model.observe(0, true, 8);
    model.observe(2000, true, 8 + 0.01 * 2000);
  }
  EXPECT_NEAR(model.decode_ms(), 8, 0.01) << "recovered";
  EXPECT_NEAR(model.ms_per_cost(), 0.01, 1e-4);
  // A lasting change (many more decodes) is followed within a few steps.
  for (int i = 0; i < 12; ++i) model.observe(0, true, 100);
  EXPECT_GT(model.decode_ms(), 90);
  EXPECT_DOUBLE_EQ(model.prefill_budget(5), 0) << "the decodes alone take longer than the target";
}

// One harness step whose time, recorded for the step time model, is a fixed part and a price per batch token.
void timed_step(SchedulerHarness& harness) {
  harness.step();
  harness.scheduler.record_step_time((2 + 0.05 * static_cast<double>(harness.last_batch_tokens)) / 1000);
}

TEST(LatencyTargetedChunking, KeepsThePartialPrefillLimitsAndTheMinimumChunk) {
  SchedulerOptions options;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 2048;
  options.long_prefill_token_threshold = 512;
  options.max_num_partial_prefills = 2;
  options.max_long_partial_prefills = 1;
  options.target_step_ms = 10;  // beside the chats: about 150 tokens a step in this model
  options.min_latency_chunk = 64;
  SchedulerHarness harness(fake_model(2048, 16, 4096), options, true);
  for (int32_t i = 0; i < 4; ++i) harness.add(numbered_prompt(10 * i, 8, 200));
  for (int i = 0; i < 4; ++i) {
    timed_step(harness);
  }
  // Distinct first blocks: no prompt maps another's blocks from the prefix cache.
  Sequence* first_doc = harness.add(numbered_prompt(3001, 3000, 2));
  Sequence* second_doc = harness.add(numbered_prompt(6002, 3000, 2));
  Sequence* short_prompt = harness.add(numbered_prompt(9003, 300, 2));
  for (int step = 0; step < 1000 && (first_doc->num_output_tokens() == 0 || short_prompt->num_output_tokens() == 0);
       ++step) {
    const int32_t before[3] = {first_doc->num_computed, second_doc->num_computed, short_prompt->num_computed};
    timed_step(harness);
    const int32_t grew[3] = {first_doc->num_computed - before[0], second_doc->num_computed - before[1],
                             short_prompt->num_computed - before[2]};
    EXPECT_LE(std::count_if(std::begin(grew), std::end(grew), [](int32_t n) { return n > 1; }), 2)
        << "max_num_partial_prefills";
    const bool both_long =
        first_doc->num_prompt_tokens - before[0] > 512 && second_doc->num_prompt_tokens - before[1] > 512;
    EXPECT_FALSE(both_long && grew[0] > 1 && grew[1] > 1) << "one long prefill at a time";
    for (int32_t n : grew) EXPECT_LE(n, 512) << "the threshold still caps a chunk";
    if (before[2] == 0 && grew[2] > 0) {
      EXPECT_GE(grew[2], 64) << "a short prompt beside a document gets its minimum";
    }
  }
  EXPECT_GT(harness.scheduler.stats().latency_limited_chunks, 0u);
  EXPECT_TRUE(harness.run_to_completion());
  expect_reference_outputs(harness);
}

TEST(LatencyTargetedChunking, PreemptionUnderATightPoolStillFinishesEverySequence) {
  SchedulerOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 256;
  options.target_step_ms = 4;
  options.min_latency_chunk = 16;
  SchedulerHarness harness(fake_model(48, 4, 128), options, true);
  for (int32_t i = 0; i < 6; ++i) harness.add(numbered_prompt(30 * i, 20 + 7 * i, 40));
  int steps = 0;
  while (harness.scheduler.has_work() && steps++ < 10000) {
    timed_step(harness);
  }
  EXPECT_FALSE(harness.scheduler.has_work());
  EXPECT_GT(harness.scheduler.stats().preemptions, 0u) << "the pool is small enough to force preemption";
  EXPECT_GT(harness.scheduler.stats().latency_limited_chunks, 0u);
  expect_reference_outputs(harness);
}

TEST(LatencyTargetedChunking, RefusesABadTargetOrMinimum) {
  BlockManager blocks(64, 4, true);
  for (auto [target, minimum] : {std::pair{-1.0, 256}, {std::numeric_limits<double>::infinity(), 256}, {50.0, 0}}) {
    SchedulerOptions options;
    options.max_model_len = 64;
    options.target_step_ms = target;
    options.min_latency_chunk = minimum;
    EXPECT_THROW(Scheduler(options, blocks), Error) << target << " " << minimum;
  }
}

}  // namespace
}  // namespace qinfer::testing
