#include "backend/cuda/same_device_communicator.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/rank_order_sum.h"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

cudaStream_t cuda_stream(CommStream stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

SameDeviceGroup::SameDeviceGroup(int size) : rendezvous_(std::make_shared<InProcessGroup>(size)) {
  QINFER_CHECK(size <= kMaxSameDeviceRanks, "the same-device communicator takes at most 8 ranks");
  for (std::vector<cudaEvent_t>* events : {&inputs_ready_, &reads_done_}) {
    events->resize(static_cast<size_t>(size));
    for (cudaEvent_t& event : *events) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
}

SameDeviceGroup::~SameDeviceGroup() {
  for (std::vector<cudaEvent_t>* events : {&inputs_ready_, &reads_done_})
    for (cudaEvent_t event : *events) cudaEventDestroy(event);
}

SameDeviceCommunicator::SameDeviceCommunicator(std::shared_ptr<SameDeviceGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  QINFER_CHECK(rank >= 0 && rank < group_->size());
}

void SameDeviceCommunicator::wait_for_peers(const std::vector<cudaEvent_t>& events, cudaStream_t stream) const {
  for (size_t r = 0; r < events.size(); ++r)
    if (static_cast<int>(r) != rank_) CUDA_CHECK(cudaStreamWaitEvent(stream, events[r], 0));
}

template <typename ReadPeers>
void SameDeviceCommunicator::collective(const void* send, void* recv, size_t count, CommDtype dtype,
                                        cudaStream_t stream, ReadPeers read_peers) {
  SameDeviceGroup& g = *group_;
  const size_t r = static_cast<size_t>(rank_);
  // Every record below happens before the rendezvous after it, so each peer's wait sees this collective's record;
  // a rank records an event again only after the next rendezvous, by which every peer has queued its wait.
  CUDA_CHECK(cudaEventRecord(g.inputs_ready_[r], stream));
  const std::vector<InProcessGroup::Slot>& slots = g.rendezvous_->exchange(rank_, {send, recv, count, dtype});
  wait_for_peers(g.inputs_ready_, stream);
  std::vector<const void*> sends;
  for (const InProcessGroup::Slot& slot : slots) sends.push_back(slot.send);
  read_peers(sends);
  CUDA_CHECK(cudaEventRecord(g.reads_done_[r], stream));
  g.rendezvous_->arrive_and_wait();
  wait_for_peers(g.reads_done_, stream);
}

void SameDeviceCommunicator::all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream) {
  const cudaStream_t s = cuda_stream(stream);
  const size_t bytes = count * comm_dtype_bytes(dtype);
  if (scratch_.bytes() < bytes) {
    CUDA_CHECK(cudaStreamSynchronize(s));  // the old scratch may still be read
    scratch_ = DeviceBuffer(bytes, "same-device all-reduce scratch");
  }
  collective(buffer, buffer, count, dtype, s, [&](const std::vector<const void*>& sends) {
    RankOrderSumParams sum;
    for (size_t r = 0; r < sends.size(); ++r) sum.inputs[r] = sends[r];
    sum.num_inputs = static_cast<int>(sends.size());
    sum.out = scratch_.data();
    sum.count = count;
    sum.dtype = dtype;
    launch_rank_order_sum(sum, s);
  });
  // Every rank has read every buffer: the sum may replace this rank's input.
  CUDA_CHECK(cudaMemcpyAsync(buffer, scratch_.data(), bytes, cudaMemcpyDeviceToDevice, s));
}

void SameDeviceCommunicator::all_gather(const void* send, void* recv, size_t count, CommDtype dtype,
                                        CommStream stream) {
  const cudaStream_t s = cuda_stream(stream);
  const size_t bytes = count * comm_dtype_bytes(dtype);
  collective(send, recv, count, dtype, s, [&](const std::vector<const void*>& sends) {
    for (size_t r = 0; r < sends.size(); ++r)
      CUDA_CHECK(
          cudaMemcpyAsync(static_cast<std::byte*>(recv) + r * bytes, sends[r], bytes, cudaMemcpyDeviceToDevice, s));
  });
}

void SameDeviceCommunicator::broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream) {
  QINFER_CHECK(root >= 0 && root < size());
  const cudaStream_t s = cuda_stream(stream);
  collective(buffer, buffer, count, dtype, s, [&](const std::vector<const void*>& sends) {
    if (rank_ != root)
      CUDA_CHECK(cudaMemcpyAsync(buffer, sends[static_cast<size_t>(root)], count * comm_dtype_bytes(dtype),
                                 cudaMemcpyDeviceToDevice, s));
  });
}

void SameDeviceCommunicator::barrier() {
  CUDA_CHECK(cudaDeviceSynchronize());
  group_->rendezvous_->arrive_and_wait();
}

std::vector<std::unique_ptr<Communicator>> make_same_device_communicators(int size) {
  auto group = std::make_shared<SameDeviceGroup>(size);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int rank = 0; rank < size; ++rank)
    communicators.push_back(std::make_unique<SameDeviceCommunicator>(group, rank));
  return communicators;
}

}  // namespace qinfer::cuda
