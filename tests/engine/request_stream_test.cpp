// RequestStream as an event loop polls it: a drain with a zero timeout takes what is queued and never sleeps.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>

#include "engine/request.h"

namespace qinfer {
namespace {

long voluntary_context_switches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

TEST(RequestStream, ZeroTimeoutDrainNeverSleeps) {
  RequestStream stream(1);
  std::vector<StreamDelta> out;
  const long before = voluntary_context_switches();
  // An expired timed wait on the condition variable would still enter the kernel and give up the CPU each time.
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(stream.wait_drain(out, std::chrono::milliseconds(0)));
  EXPECT_LT(voluntary_context_switches() - before, 10);
  EXPECT_TRUE(out.empty());

  StreamDelta delta;
  delta.token_ids = {7};
  stream.push(delta);
  EXPECT_TRUE(stream.wait_drain(out, std::chrono::milliseconds(0)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token_ids, std::vector<int32_t>{7});
  stream.close();
  out.clear();
  EXPECT_FALSE(stream.wait_drain(out, std::chrono::milliseconds(0)));  // done and drained
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace qinfer
