#include "backend/parallel/in_process_communicator.h"

#include <cstring>

#include "util/error.h"
#include "util/half.h"

namespace qinfer {

InProcessGroup::InProcessGroup(int size) : size_(size), slots_(static_cast<size_t>(size)) {
  QINFER_CHECK(size >= 1, "a communicator group needs at least one rank");
}

void InProcessGroup::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = reason;
  }
  all_arrived_.notify_all();
}

bool InProcessGroup::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

void InProcessGroup::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  const auto refuse = [this] {
    throw Error(ErrorKind::kUnavailable, "tensor-parallel group stopped: " + abort_reason_);
  };
  if (aborted_) refuse();
  const size_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    lock.unlock();
    all_arrived_.notify_all();
    return;
  }
  all_arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation) refuse();
}

const std::vector<InProcessGroup::Slot>& InProcessGroup::exchange(int rank, const Slot& slot) {
  {
    std::lock_guard lock(mutex_);
    slots_[static_cast<size_t>(rank)] = slot;
  }
  arrive_and_wait();
  for (const Slot& other : slots_)
    QINFER_CHECK(other.count == slot.count && other.dtype == slot.dtype,
                 "ranks called a collective with different counts or dtypes");
  return slots_;
}

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  QINFER_CHECK(rank >= 0 && rank < group_->size());
}

namespace {

// The sum over the slots' buffers (in rank order) of elements [begin, end), written back into every buffer.
template <typename Load, typename Store>
void sum_into_all(const auto& slots, size_t begin, size_t end, Load load, Store store) {
  for (size_t i = begin; i < end; ++i) {
    float sum = load(slots[0].recv, i);
    for (size_t r = 1; r < slots.size(); ++r) sum += load(slots[r].recv, i);
    for (const auto& slot : slots) store(slot.recv, i, sum);
  }
}

}  // namespace

void InProcessCommunicator::all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream) {
  const std::vector<InProcessGroup::Slot>& slots = group_->exchange(rank_, {buffer, buffer, count, dtype});
  // Each rank sums its own slice of the elements across all buffers: the slices are disjoint, so no element is read
  // by one thread while another writes it.
  const size_t n = static_cast<size_t>(size()), r = static_cast<size_t>(rank_);
  const size_t begin = count * r / n, end = count * (r + 1) / n;
  if (dtype == CommDtype::kF32) {
    sum_into_all(
        slots, begin, end, [](void* p, size_t i) { return static_cast<float*>(p)[i]; },
        [](void* p, size_t i, float v) { static_cast<float*>(p)[i] = v; });
  } else {
    // fp32 accumulation, rounded to bf16 once.
    sum_into_all(
        slots, begin, end, [](void* p, size_t i) { return bf16_to_float(static_cast<uint16_t*>(p)[i]); },
        [](void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = float_to_bf16(v); });
  }
  finish();
}

void InProcessCommunicator::all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream) {
  const std::vector<InProcessGroup::Slot>& slots = group_->exchange(rank_, {send, recv, count, dtype});
  const size_t bytes = count * comm_dtype_bytes(dtype);
  for (size_t r = 0; r < slots.size(); ++r)
    std::memcpy(static_cast<std::byte*>(recv) + r * bytes, slots[r].send, bytes);
  finish();
}

void InProcessCommunicator::broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream) {
  QINFER_CHECK(root >= 0 && root < size());
  const std::vector<InProcessGroup::Slot>& slots = group_->exchange(rank_, {buffer, buffer, count, dtype});
  if (rank_ != root) std::memcpy(buffer, slots[static_cast<size_t>(root)].send, count * comm_dtype_bytes(dtype));
  finish();
}

void InProcessCommunicator::barrier() { group_->arrive_and_wait(); }

std::vector<std::unique_ptr<Communicator>> make_in_process_communicators(int size) {
  auto group = std::make_shared<InProcessGroup>(size);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int rank = 0; rank < size; ++rank) communicators.push_back(std::make_unique<InProcessCommunicator>(group, rank));
  return communicators;
}

}  // namespace qinfer
