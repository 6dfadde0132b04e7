// A backend that can no longer run (a tensor-parallel rank died) says why through EngineStats, which /health turns
// into a 503.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "testing/fake_backend.h"

namespace qinfer::testing {
namespace {

// The finish reason of a one-sample request once its stream ends.
FinishReason finish_reason(RequestStream& stream) {
  FinishReason finish = FinishReason::kNone;
  std::vector<StreamDelta> deltas;
  while (stream.wait_drain(deltas, std::chrono::milliseconds(10000))) {
    for (const StreamDelta& delta : deltas)
      if (delta.finish_reason != FinishReason::kNone) finish = delta.finish_reason;
    deltas.clear();
  }
  return finish;
}

TEST(EngineBackendFailure, StatsSayWhyTheBackendCannotRun) {
  FakeBackend backend(fake_model());
  Engine engine(backend, EngineOptions{});
  GenerationRequest request;
  request.prompt.resize(10);
  std::iota(request.prompt.begin(), request.prompt.end(), 1);
  request.sampling.temperature = 0.0f;
  request.max_tokens = 5;
  RequestHandle handle = engine.submit(request);
  engine.step();
  EXPECT_EQ(engine.stats().backend_failure, "");
  backend.fail_for_good("rank 1: lost its GPU");
  engine.step();
  EXPECT_EQ(engine.stats().backend_failure, "rank 1: lost its GPU");
  EXPECT_EQ(finish_reason(*handle.stream), FinishReason::kError);
}

}  // namespace
}  // namespace qinfer::testing
