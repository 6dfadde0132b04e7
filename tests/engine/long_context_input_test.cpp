// The bad input of long contexts over the fake backend: refused at submit with the numbers, or preempted under load.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "testing/fake_backend.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

// The bad input of long contexts: a prompt past the context and a request whose KV cannot fit even alone are refused at
// submit with the numbers (the queue stays empty, nothing waits forever); a pool too small for the load preempts and
// every request still finishes.
TEST(Engine, LongContextBadInputIsRefusedWithTheNumbersAndAFullPoolPreempts) {
  FakeModelSpec spec = fake_model();  // 64 blocks of 4, max_model_len 128
  FakeBackend backend(spec);
  EngineOptions options = engine_options();
  options.target_itl_ms = 50;
  Engine engine(backend, options);
  auto refusal = [&](const GenerationRequest& request) -> std::string {
    try {
      engine.submit(request);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string too_long = refusal(greedy_request(tokens_from(1, 200), 4));
  EXPECT_NE(too_long.find("prompt has 200 tokens"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("max_model_len is 128"), std::string::npos) << too_long;
  GenerationRequest cannot_fit = greedy_request(tokens_from(1, 100), 20);
  cannot_fit.n = 8;  // 24 shared prompt blocks + 8 x 6 of their own: 72 blocks at once
  const std::string kv = refusal(cannot_fit);
  EXPECT_NE(kv.find("KV blocks at once; the cache has 64"), std::string::npos) << kv;
  EXPECT_FALSE(engine.step()) << "nothing was queued";
  EXPECT_EQ(engine.stats().num_waiting, 0);
  // Eight requests of 100 + 20 tokens need 8 x 30 blocks; the pool has 64.
  std::vector<RequestHandle> handles;
  for (int32_t i = 0; i < 8; ++i) {
    GenerationRequest request = greedy_request(tokens_from(1 + 3 * i, 100), 20);
    request.ignore_eos = true;
    handles.push_back(engine.submit(request));
  }
  for (int i = 0; i < 2000 && (i == 0 || engine.has_work()); ++i) engine.step();  // the first takes the submits
  for (RequestHandle& handle : handles) {
    Collected got = collect(*handle.stream, 1);
    EXPECT_EQ(got.finish[0], FinishReason::kLength);
    EXPECT_EQ(got.tokens[0].size(), 20u);
  }
  EXPECT_GT(engine.stats().scheduler.preemptions, 0u);
  EXPECT_EQ(engine.stats().num_free_blocks, spec.num_blocks);
}

}  // namespace
}  // namespace qinfer::testing
