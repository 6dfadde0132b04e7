#include "server/admission.h"

namespace qinfer::server {

Admission::Slot::~Slot() {
  if (owner_) owner_->release();
}

Admission::Outcome Admission::admit(std::chrono::steady_clock::time_point deadline) {
  Outcome outcome;
  auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  if (closed_) {
    outcome.refusal = Refusal::kClosed;
    return outcome;
  }
  if (running_ >= max_running_) {
    if (waiting_ >= max_waiting_) return outcome;
    ++waiting_;
    bool got = changed_.wait_until(lock, deadline, [&] { return closed_ || running_ < max_running_; });
    --waiting_;
    changed_.notify_all();
    if (closed_ || !got) {
      outcome.refusal = closed_ ? Refusal::kClosed : Refusal::kTimedOut;
      return outcome;
    }
  }
  ++running_;
  outcome.slot.emplace(this);
  outcome.queued_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

void Admission::release() {
  {
    std::lock_guard lock(mutex_);
    --running_;
  }
  changed_.notify_all();
}

void Admission::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

int32_t Admission::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

int32_t Admission::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

bool Admission::wait_idle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return changed_.wait_until(lock, deadline, [&] { return running_ == 0 && waiting_ == 0; });
}

}  // namespace qinfer::server
