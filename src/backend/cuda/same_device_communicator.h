// Collectives between tensor-parallel ranks that share one GPU: what lets the GPU tests (and the
// --tensor-parallel-same-device diagnostic) run N CUDA ranks on a machine with one GPU, where NCCL refuses two ranks
// of a communicator on the same device. Buffers are device memory of that GPU, each rank's collective is ordered on
// the rank's stream, and the ranks call from their own threads as they do with NCCL.
//
// A collective is a host rendezvous (an InProcessGroup) at which every rank publishes its buffer pointers and has
// recorded an event after its input on its stream; each rank's stream then waits for the other ranks' events and
// does its part on the device: an all-reduce sums the ranks' buffers in rank order into the rank's scratch
// (launch_rank_order_sum: the same bits on every rank) and, after a second rendezvous and event wait (no rank
// overwrites a buffer another still reads), copies the sum into its buffer; all-gather and broadcast are device
// copies. The host waits make it eager only: the ranks' CUDA graphs cannot capture it (the tensor-parallel backend
// turns graphs off with it).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/parallel/communicator.h"
#include "backend/parallel/in_process_communicator.h"

namespace qinfer::cuda {

// What the ranks of one group share: the rendezvous and every rank's events.
class SameDeviceGroup {
 public:
  // `size` ranks on the current device, at most kMaxSameDeviceRanks.
  explicit SameDeviceGroup(int size);
  ~SameDeviceGroup();
  SameDeviceGroup(const SameDeviceGroup&) = delete;
  SameDeviceGroup& operator=(const SameDeviceGroup&) = delete;

  int size() const { return rendezvous_->size(); }
  // Every collective waiting now or called later throws Error(kUnavailable) naming `reason`.
  void abort(const std::string& reason) { rendezvous_->abort(reason); }

 private:
  friend class SameDeviceCommunicator;
  std::shared_ptr<InProcessGroup> rendezvous_;
  std::vector<cudaEvent_t> inputs_ready_;  // [size]: recorded by its rank after the collective's input
  std::vector<cudaEvent_t> reads_done_;    // [size]: recorded by its rank after it read the other ranks' buffers
};

class SameDeviceCommunicator final : public Communicator {
 public:
  SameDeviceCommunicator(std::shared_ptr<SameDeviceGroup> group, int rank);

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream = nullptr) override;
  // Waits for the device, then for every rank.
  void barrier() override;

 private:
  // Records this rank's input event on `stream`, publishes `send`/`recv` and waits for every rank; the stream then
  // waits for the others' inputs. `read_peers(send pointers)` enqueues this rank's reads of the other ranks' buffers;
  // afterwards every stream waits for every rank's reads.
  template <typename ReadPeers>
  void collective(const void* send, void* recv, size_t count, CommDtype dtype, cudaStream_t stream,
                  ReadPeers read_peers);
  void wait_for_peers(const std::vector<cudaEvent_t>& events, cudaStream_t stream) const;

  std::shared_ptr<SameDeviceGroup> group_;
  int rank_;
  DeviceBuffer scratch_;  // the all-reduce's sum before it is copied into the rank's buffer; grown on demand
};

// One communicator per rank of a new group of `size` ranks on the current device, in rank order.
std::vector<std::unique_ptr<Communicator>> make_same_device_communicators(int size);

}  // namespace qinfer::cuda
