#include <gtest/gtest.h>

#include <thread>

#include "server/admission.h"
#include "server/auth.h"

namespace qinfer::server {
namespace {

TEST(Auth, BearerToken) {
  EXPECT_TRUE(bearer_authorized("", ""));
  EXPECT_TRUE(bearer_authorized("sk-1", "Bearer sk-1"));
  EXPECT_FALSE(bearer_authorized("sk-1", "Bearer sk-2"));
  EXPECT_FALSE(bearer_authorized("sk-1", "Bearer sk-1x"));
  EXPECT_FALSE(bearer_authorized("sk-1", "Bearer sk-"));
  EXPECT_FALSE(bearer_authorized("sk-1", "bearer sk-1"));
  EXPECT_FALSE(bearer_authorized("sk-1", "sk-1"));
  EXPECT_FALSE(bearer_authorized("sk-1", ""));
  EXPECT_FALSE(constant_time_equals(std::string("a\0b", 3), "a"));
}

TEST(Admission, RunsQueuesAndRefuses) {
  Admission admission(1, 1);
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Admission::Outcome first = admission.admit(later);
  ASSERT_TRUE(first.slot);
  std::optional<Admission::Outcome> second;
  std::thread waiter([&] { second.emplace(admission.admit(later)); });
  while (admission.waiting() == 0) std::this_thread::yield();
  Admission::Outcome third = admission.admit(later);  // queue full
  EXPECT_FALSE(third.slot);
  EXPECT_EQ(third.refusal, Admission::Refusal::kQueueFull);
  first.slot.reset();  // frees the slot for the waiter
  waiter.join();
  ASSERT_TRUE(second->slot);
  EXPECT_EQ(admission.running(), 1);
  Admission::Outcome timed_out = admission.admit(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
  EXPECT_FALSE(timed_out.slot);
  EXPECT_EQ(timed_out.refusal, Admission::Refusal::kTimedOut);
  EXPECT_FALSE(admission.wait_idle(std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
  second->slot.reset();
  EXPECT_TRUE(admission.wait_idle(std::chrono::steady_clock::now()));
}

TEST(Admission, CloseRefusesWaitersAtOnceAndKeepsHeldSlots) {
  Admission admission(1, 2);
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Admission::Outcome held = admission.admit(later);
  ASSERT_TRUE(held.slot);
  std::optional<Admission::Outcome> waited;
  std::thread waiter([&] { waited.emplace(admission.admit(later)); });
  while (admission.waiting() == 0) std::this_thread::yield();
  const auto closed_at = std::chrono::steady_clock::now();
  admission.close();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, std::chrono::seconds(5));  // not its 60 s deadline
  EXPECT_FALSE(waited->slot);
  EXPECT_EQ(waited->refusal, Admission::Refusal::kClosed);
  Admission::Outcome after = admission.admit(later);
  EXPECT_FALSE(after.slot);
  EXPECT_EQ(after.refusal, Admission::Refusal::kClosed);
  EXPECT_EQ(admission.running(), 1);
  EXPECT_EQ(admission.waiting(), 0);
  held.slot.reset();
  EXPECT_TRUE(admission.wait_idle(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace qinfer::server
