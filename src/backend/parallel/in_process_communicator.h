// Collectives between ranks that are threads of one process, over host memory: the communicator of the CPU
// tensor-parallel backend and of the tests. Every collective is a rendezvous of all ranks (one shared
// InProcessGroup); a sum adds the ranks' values in rank order 0, 1, ..., N-1 for every element, so results do not
// depend on thread timing and equal what one thread adding the N partials in that order gets.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/parallel/communicator.h"

namespace qinfer {

class InProcessGroup {
 public:
  explicit InProcessGroup(int size);

  int size() const { return size_; }

  // Ends the group: every collective waiting now or called later throws Error(kUnavailable) naming `reason`. A rank
  // whose work failed calls it so that the other ranks do not wait for it forever.
  void abort(const std::string& reason);
  bool aborted() const;

  // What one rank brings to a collective.
  struct Slot {
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;
    CommDtype dtype = CommDtype::kF32;
  };

  // Publishes `slot` as rank `rank`'s and waits for every rank's (checking that the counts and dtypes agree); the
  // slots returned stay valid until the rank's next arrive_and_wait(), which ends the collective. Throws once the
  // group is aborted.
  const std::vector<Slot>& exchange(int rank, const Slot& slot);

  // Waits until all ranks have called it (a reusable barrier); throws once the group is aborted.
  void arrive_and_wait();

 private:
  const int size_;
  mutable std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  size_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  std::vector<Slot> slots_;  // [size]: written by its rank before the first barrier of a collective
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank);

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream stream = nullptr) override;
  void broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream = nullptr) override;
  void barrier() override;

 private:
  void finish() { group_->arrive_and_wait(); }

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

// One communicator per rank of a new group of `size` ranks, in rank order.
std::vector<std::unique_ptr<Communicator>> make_in_process_communicators(int size);

}  // namespace qinfer
