// The NCCL communicator on every visible GPU, one rank per GPU (one GPU is a group of one): sums, gathers and
// broadcasts of device buffers against the values computed on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "backend/parallel/nccl_communicator.h"
#include "util/half.h"

namespace qinfer {
namespace {

std::vector<int> visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  std::vector<int> devices(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) devices[static_cast<size_t>(i)] = i;
  return devices;
}

// Runs fn(rank's communicator) on one thread per rank, each with its GPU current.
void on_ranks(std::vector<std::unique_ptr<NcclCommunicator>>& communicators,
              const std::function<void(NcclCommunicator&)>& fn) {
  std::vector<std::jthread> threads;
  for (auto& c : communicators)
    threads.emplace_back([&fn, &c] {
      ASSERT_EQ(cudaSetDevice(c->device()), cudaSuccess);
      fn(*c);
    });
}

// A device copy of `values`; freed by the caller.
template <typename T>
T* to_device(const std::vector<T>& values) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, values.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return device;
}

template <typename T>
std::vector<T> to_host(const T* device, size_t count) {
  std::vector<T> values(count);
  EXPECT_EQ(cudaMemcpy(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return values;
}

TEST(NcclCommunicator, CollectivesOverEveryVisibleGpu) {
  const std::vector<int> devices = visible_devices();
  ASSERT_FALSE(devices.empty());
  auto communicators = make_nccl_communicators(devices);
  ASSERT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  const int size = static_cast<int>(devices.size());
  constexpr size_t kCount = 4099;
  on_ranks(communicators, [&](NcclCommunicator& c) {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    // Small integers: their sums are exact in any order, in fp32 and in bf16.
    std::vector<float> values(kCount);
    for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>((i % 7) + c.rank());
    float* sum = to_device(values);
    c.all_reduce_sum(sum, kCount, CommDtype::kF32, stream);
    std::vector<uint16_t> bf16_values(kCount);
    for (size_t i = 0; i < kCount; ++i) bf16_values[i] = float_to_bf16(values[i]);
    uint16_t* bf16_sum = to_device(bf16_values);
    c.all_reduce_sum(bf16_sum, kCount, CommDtype::kBf16, stream);
    float* gathered = nullptr;
    ASSERT_EQ(cudaMalloc(&gathered, kCount * static_cast<size_t>(size) * sizeof(float)), cudaSuccess);
    float* send = to_device(values);
    c.all_gather(send, gathered, kCount, CommDtype::kF32, stream);
    std::vector<float> mine(kCount, static_cast<float>(100 + c.rank()));
    float* broadcast = to_device(mine);
    c.broadcast(broadcast, kCount, CommDtype::kF32, /*root=*/size - 1, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    c.barrier();
    c.check_async_error();

    const std::vector<float> sums = to_host(sum, kCount);
    const std::vector<uint16_t> bf16_sums = to_host(bf16_sum, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      const float expected = static_cast<float>(size * static_cast<int>(i % 7) + size * (size - 1) / 2);
      ASSERT_EQ(sums[i], expected) << i;
      ASSERT_EQ(bf16_to_float(bf16_sums[i]), expected) << i;
    }
    const std::vector<float> all = to_host(gathered, kCount * static_cast<size_t>(size));
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < kCount; i += 97)
        ASSERT_EQ(all[static_cast<size_t>(r) * kCount + i], static_cast<float>((i % 7) + r));
    EXPECT_EQ(to_host(broadcast, kCount), std::vector<float>(kCount, static_cast<float>(100 + size - 1)));
    for (void* p : {static_cast<void*>(sum), static_cast<void*>(bf16_sum), static_cast<void*>(gathered),
                    static_cast<void*>(send), static_cast<void*>(broadcast)})
      cudaFree(p);
    cudaStreamDestroy(stream);
  });
}

TEST(NcclCommunicator, RanksJoinByUniqueId) {
  const std::vector<int> devices = visible_devices();
  ASSERT_FALSE(devices.empty());
  const NcclUniqueId id = make_nccl_unique_id();
  const int size = static_cast<int>(devices.size());
  std::vector<std::unique_ptr<NcclCommunicator>> communicators(devices.size());
  {
    // ncclCommInitRank blocks until every rank has joined: one thread each.
    std::vector<std::jthread> joining;
    for (int r = 0; r < size; ++r)
      joining.emplace_back([&, r] {
        communicators[static_cast<size_t>(r)] =
            std::make_unique<NcclCommunicator>(id, r, size, devices[static_cast<size_t>(r)]);
      });
  }
  on_ranks(communicators, [&](NcclCommunicator& c) {
    EXPECT_EQ(c.size(), size);
    c.barrier();
  });
}

}  // namespace
}  // namespace qinfer
