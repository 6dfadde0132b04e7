// Server-side admission: at most `max_running` generation requests hand work to the engine at once, at most
// `max_waiting` more wait for a slot, everything beyond is refused (HTTP 429 with Retry-After). Also counts
// requests in flight so that shutdown can wait for them to drain, and closes for shutdown (waiters refused at once).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace qinfer::server {

class Admission {
 public:
  Admission(int32_t max_running, int32_t max_waiting) : max_running_(max_running), max_waiting_(max_waiting) {}

  // A running slot; releases it when destroyed.
  class Slot {
   public:
    explicit Slot(Admission* owner) : owner_(owner) {}
    Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    Admission* owner_;
  };

  enum class Refusal { kQueueFull, kTimedOut, kClosed };
  struct Outcome {
    std::optional<Slot> slot;
    Refusal refusal = Refusal::kQueueFull;  // when no slot
    double queued_seconds = 0;              // time spent waiting for the slot
  };
  // Takes a slot now, or waits for one until `deadline` when the queue has room.
  Outcome admit(std::chrono::steady_clock::time_point deadline);

  // Shutdown: every waiter and every later admit() is refused with kClosed at once; slots held stay held.
  void close();

  int32_t running() const;
  int32_t waiting() const;
  // Waits until nothing runs or waits, at most until `deadline`; true when idle.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);

 private:
  void release();

  const int32_t max_running_;
  const int32_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int32_t running_ = 0;
  int32_t waiting_ = 0;
  bool closed_ = false;
};

}  // namespace qinfer::server
