// Collectives between GPU ranks over NCCL (the CUDA toolkit's libnccl). Buffers are device memory on the rank's GPU;
// every call is queued on the given stream (a cudaStream_t, so that CUDA graphs capture it) and returns without
// waiting, except barrier(). Built whenever the CUDA backend is; qinfer sets NCCL_NVLS_ENABLE=0 (NVLink multicast
// off) before the first communicator is made unless the environment already says otherwise.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "backend/parallel/communicator.h"

namespace qinfer {

// NCCL's unique id (ncclUniqueId, 128 bytes): made by one rank, handed to the others (the way ranks in separate
// processes find each other).
using NcclUniqueId = std::array<char, 128>;
NcclUniqueId make_nccl_unique_id();

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group of `size` ranks named by `id` as `rank`, on GPU `device` (ncclCommInitRank); blocks until every
  // rank has joined. Throws Error(kUnavailable) with NCCL's reason.
  NcclCommunicator(const NcclUniqueId& id, int rank, int size, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const { return device_; }
  void all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream = nullptr) override;
  // An all-reduce of one value on the communicator's own stream, then a wait for it: every rank has reached it.
  void barrier() override;

  // Throws Error(kUnavailable) when the communicator has failed asynchronously (a peer died, a network error):
  // what a rank checks so that a failure becomes an error state instead of a hang.
  void check_async_error() const;

  // Ends the communicator at once (ncclCommAbort): collectives in flight on any rank return with an error instead of
  // waiting for this one. What a failing rank does before it reports; afterwards only destruction is valid.
  void abort();

 private:
  friend std::vector<std::unique_ptr<NcclCommunicator>> make_nccl_communicators(std::span<const int> devices);
  struct Handle;  // the ncclComm_t, its barrier buffer and stream
  explicit NcclCommunicator(std::unique_ptr<Handle> handle, int rank, int size, int device);

  std::unique_ptr<Handle> handle_;
  int rank_, size_, device_;
};

// One communicator per GPU of `devices` (rank r on devices[r]) for the ranks of one process (ncclCommInitAll).
// Throws Error(kUnavailable) with NCCL's reason.
std::vector<std::unique_ptr<NcclCommunicator>> make_nccl_communicators(std::span<const int> devices);

// Makes GPU `device` current for one scope and the previous one again after (the communicators' calls, and the CUDA
// ranks' set-up on their GPUs). Throws Error(kUnavailable) when the device cannot be made current.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

 private:
  int previous_ = 0;
};

// Sets NCCL_NVLS_ENABLE=0 unless the variable is already set: NVLink multicast stays off (on shared multi-GPU hosts a
// program using it can take the host's GPUs out of service; NCCL's NVLS buffers also cost memory the KV pool wants).
// The communicator constructors call it before NCCL initialises.
void set_nccl_environment_defaults();

}  // namespace qinfer
