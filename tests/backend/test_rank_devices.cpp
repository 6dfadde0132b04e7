// Where the ranks of a CUDA tensor-parallel group run, and the start-up refusals of placements that cannot work.
#include <gtest/gtest.h>

#include <string>

#include "backend/parallel/rank_devices.h"
#include "util/error.h"

namespace qinfer {
namespace {

bool all_peers(int, int) { return true; }

// The error tensor_parallel_devices throws, or the empty string.
std::string refusal(int size, bool same_device, int gpus, const std::function<bool(int, int)>& peers, ErrorKind kind) {
  try {
    tensor_parallel_devices(size, same_device, gpus, peers);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  return "";
}

TEST(TensorParallelDevices, RankRRunsOnGpuR) {
  EXPECT_EQ(tensor_parallel_devices(1, false, 1, all_peers), (std::vector<int>{0}));
  EXPECT_EQ(tensor_parallel_devices(2, false, 8, all_peers), (std::vector<int>{0, 1}));
  EXPECT_EQ(tensor_parallel_devices(4, false, 4, all_peers), (std::vector<int>{0, 1, 2, 3}));
}

TEST(TensorParallelDevices, SameDevicePutsEveryRankOnGpuZero) {
  EXPECT_EQ(tensor_parallel_devices(4, true, 1, [](int, int) { return false; }), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_NE(refusal(9, true, 1, all_peers, ErrorKind::kInvalidArgument).find("at most 8 ranks"), std::string::npos);
}

TEST(TensorParallelDevices, MoreRanksThanGpusAreRefusedNamingBoth) {
  const std::string message = refusal(4, false, 2, all_peers, ErrorKind::kUnavailable);
  EXPECT_NE(message.find("--tensor-parallel-size 4 needs 4 GPUs; 2 visible"), std::string::npos) << message;
  EXPECT_NE(refusal(2, false, 0, all_peers, ErrorKind::kUnavailable).find("no GPU"), std::string::npos);
}

TEST(TensorParallelDevices, GpusWithoutPeerAccessAreRefusedNamingThem) {
  // GPU 2 cannot reach GPU 1 (a PCIe topology without peer-to-peer between them).
  const auto peers = [](int device, int peer) { return !(device == 2 && peer == 1); };
  EXPECT_EQ(tensor_parallel_devices(2, false, 4, peers), (std::vector<int>{0, 1}));
  const std::string message = refusal(4, false, 4, peers, ErrorKind::kUnavailable);
  EXPECT_NE(message.find("GPU 2 cannot access the memory of GPU 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace qinfer
