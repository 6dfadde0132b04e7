// The in-process communicator of tensor parallelism: deterministic rank-order sums, gathers, broadcasts, many ranks,
// and a failed rank waking the others.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "backend/parallel/in_process_communicator.h"
#include "util/error.h"
#include "util/half.h"

namespace qinfer {
namespace {

// Runs fn(communicator) on one thread per rank of a new group of `size`.
void on_ranks(int size, const std::function<void(Communicator&)>& fn) {
  std::vector<std::unique_ptr<Communicator>> communicators = make_in_process_communicators(size);
  std::vector<std::jthread> threads;
  for (auto& c : communicators) threads.emplace_back([&fn, &c] { fn(*c); });
}

// Values whose fp32 sum depends on the order they are added in.
float rank_value(int rank, size_t i) {
  const float magnitudes[] = {1e8f, 1.0f, -1e8f, 3.5f, 0.25f, -7.0f, 1e-3f, 2e7f};
  return magnitudes[static_cast<size_t>(rank) % 8] * static_cast<float>(1 + (i + static_cast<size_t>(rank)) % 5);
}

TEST(InProcessCommunicator, AllReduceAddsInRankOrderAndGivesEveryRankTheSameBits) {
  constexpr int kRanks = 8;
  constexpr size_t kCount = 1001;  // not a multiple of the ranks: uneven slices
  std::vector<float> expected(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    float sum = rank_value(0, i);
    for (int r = 1; r < kRanks; ++r) sum += rank_value(r, i);
    expected[i] = sum;
  }
  for (int round = 0; round < 20; ++round) {
    std::vector<std::vector<float>> results(kRanks);
    on_ranks(kRanks, [&](Communicator& c) {
      std::vector<float> buffer(kCount);
      for (size_t i = 0; i < kCount; ++i) buffer[i] = rank_value(c.rank(), i);
      c.all_reduce_sum(buffer.data(), kCount, CommDtype::kF32);
      results[static_cast<size_t>(c.rank())] = std::move(buffer);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(results[static_cast<size_t>(r)], expected) << "rank " << r;
  }
}

TEST(InProcessCommunicator, Bf16AllReduceAccumulatesInFp32AndRoundsOnce) {
  constexpr int kRanks = 4;
  // 1 + 3 * 2^-9: adding in bf16 would round every partial sum 1 + 2^-9 back to 1 (a quarter of bf16's ulp at 1,
  // 2^-7); fp32 keeps 1 + 3 * 2^-9, which rounds to 1 + 2^-7 once.
  std::vector<uint16_t> results(kRanks);
  on_ranks(kRanks, [&](Communicator& c) {
    uint16_t value = float_to_bf16(c.rank() == 0 ? 1.0f : 0x1p-9f);
    c.all_reduce_sum(&value, 1, CommDtype::kBf16);
    results[static_cast<size_t>(c.rank())] = value;
  });
  for (uint16_t bits : results) EXPECT_EQ(bf16_to_float(bits), 1.0f + 0x1p-7f);
}

TEST(InProcessCommunicator, AllGatherPutsRankRInSlotR) {
  constexpr int kRanks = 5;
  constexpr size_t kCount = 3;
  std::vector<std::vector<float>> results(kRanks);
  on_ranks(kRanks, [&](Communicator& c) {
    std::vector<float> send(kCount), recv(kCount * kRanks, -1.0f);
    for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>(10 * c.rank() + static_cast<int>(i));
    c.all_gather(send.data(), recv.data(), kCount, CommDtype::kF32);
    results[static_cast<size_t>(c.rank())] = recv;
  });
  for (const auto& recv : results)
    for (size_t r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(recv[r * kCount + i], static_cast<float>(10 * r + i));
}

TEST(InProcessCommunicator, BroadcastCopiesTheRootsBuffer) {
  constexpr int kRanks = 4;
  std::vector<std::vector<uint16_t>> results(kRanks);
  on_ranks(kRanks, [&](Communicator& c) {
    std::vector<uint16_t> buffer(7, static_cast<uint16_t>(c.rank()));
    c.broadcast(buffer.data(), buffer.size(), CommDtype::kBf16, /*root=*/2);
    results[static_cast<size_t>(c.rank())] = buffer;
  });
  for (const auto& buffer : results) EXPECT_EQ(buffer, std::vector<uint16_t>(7, 2));
}

TEST(InProcessCommunicator, ManyRanksRunManyCollectivesInStep) {
  constexpr int kRanks = 16, kRounds = 300;
  std::vector<float> totals(kRanks);
  on_ranks(kRanks, [&](Communicator& c) {
    float total = 0;
    for (int round = 0; round < kRounds; ++round) {
      float value = static_cast<float>(c.rank() + round);
      c.all_reduce_sum(&value, 1, CommDtype::kF32);
      total += value;
      if (round % 50 == 0) c.barrier();
    }
    totals[static_cast<size_t>(c.rank())] = total;
  });
  // Each round sums rank + round over the ranks: 120 + 16 * round.
  const float expected = static_cast<float>(kRounds * 120 + 16 * (kRounds - 1) * kRounds / 2);
  for (float total : totals) EXPECT_EQ(total, expected);
}

TEST(InProcessCommunicator, AbortWakesRanksWaitingForOneThatFailed) {
  auto group = std::make_shared<InProcessGroup>(3);
  std::vector<std::string> errors(2);
  {
    std::vector<std::jthread> waiting;
    for (int r = 0; r < 2; ++r)
      waiting.emplace_back([&, r] {
        InProcessCommunicator c(group, r);
        try {
          c.barrier();
        } catch (const Error& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    group->abort("rank 2 failed: out of memory");
  }
  for (const std::string& error : errors) EXPECT_NE(error.find("rank 2 failed: out of memory"), std::string::npos);
  InProcessCommunicator late(group, 0);
  EXPECT_THROW(late.barrier(), Error);
}

}  // namespace
}  // namespace qinfer
