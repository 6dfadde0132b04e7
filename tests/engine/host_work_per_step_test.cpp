// Host work per decode step does not grow with the context: the engine (scheduler, block bookkeeping, prefix-cache
// registration, penalties, streaming) spends about the same time per step beside 8 sequences at 128K tokens as at 1K.
// The fake backend's own time is excluded (EngineStats: step_seconds - backend_seconds). A per-step copy or walk of a
// sequence's tokens or blocks (128K tokens = 512 KiB per sequence) costs hundreds of microseconds per step and fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/engine.h"
#include "testing/fake_backend.h"

namespace qinfer::testing {
namespace {

constexpr int32_t kSequences = 8;
constexpr int32_t kDecodeSteps = 300;

// Median host (non-backend) seconds per decode step with kSequences sequences of `context` prompt tokens.
double median_host_seconds_per_decode_step(int32_t context) {
  FakeModelSpec spec;
  spec.block_size = 16;
  spec.max_model_len = 131072 + 2048;
  spec.num_blocks = kSequences * (spec.max_model_len / spec.block_size + 1);
  FakeBackend backend(spec);
  EngineOptions options;
  options.max_num_seqs = kSequences;
  options.max_num_batched_tokens = 8192;
  Engine engine(backend, options);
  std::vector<RequestHandle> handles;
  for (int32_t s = 0; s < kSequences; ++s) {
    GenerationRequest request;
    request.prompt.resize(static_cast<size_t>(context));
    for (int32_t i = 0; i < context; ++i) request.prompt[static_cast<size_t>(i)] = 1 + (s * 7919 + i * 31) % 500;
    request.sampling.temperature = 0;
    request.sampling.repetition_penalty = 1.1f;  // the penalty list is kept per sequence, not rebuilt per step
    // The first sequences decode while the last are still in their prompts (8 x 128K tokens take 128 steps).
    request.max_tokens = kDecodeSteps + 1024;
    request.ignore_eos = true;
    handles.push_back(engine.submit(std::move(request)));
  }
  // Prefill until every sequence has its first token: from then on each step decodes one token per sequence.
  std::vector<size_t> produced(kSequences, 0);
  for (int guard = 0; guard < 1000 && *std::min_element(produced.begin(), produced.end()) == 0; ++guard) {
    engine.step();
    for (size_t s = 0; s < handles.size(); ++s) {
      std::vector<StreamDelta> drained;
      handles[s].stream->wait_drain(drained, std::chrono::milliseconds(0));
      produced[s] += drained.size();
    }
  }
  std::vector<double> host;
  std::vector<StreamDelta> drained;
  for (int32_t i = 0; i < kDecodeSteps; ++i) {
    const EngineStats before = engine.stats();
    EXPECT_TRUE(engine.step());
    const EngineStats after = engine.stats();
    EXPECT_EQ(after.batch_sequences, kSequences) << "decode step " << i;
    host.push_back((after.step_seconds - before.step_seconds) - (after.backend_seconds - before.backend_seconds));
    drained.clear();
    for (RequestHandle& handle : handles) handle.stream->wait_drain(drained, std::chrono::milliseconds(0));
  }
  std::nth_element(host.begin(), host.begin() + static_cast<ptrdiff_t>(host.size() / 2), host.end());
  return host[host.size() / 2];
}

TEST(HostWorkPerStep, IsFlatFrom1KTo128KContext) {
  const double short_context = median_host_seconds_per_decode_step(1024);
  const double long_context = median_host_seconds_per_decode_step(131072);
  // 2x and 25 us of slack for a loaded machine; an O(context) walk of 8 x 128K tokens takes far more.
  EXPECT_LE(long_context, 2 * short_context + 25e-6)
      << "host seconds per decode step: 1K " << short_context << ", 128K " << long_context;
  RecordProperty("host_us_per_step_1k", std::to_string(short_context * 1e6));
  RecordProperty("host_us_per_step_128k", std::to_string(long_context * 1e6));
}

}  // namespace
}  // namespace qinfer::testing
