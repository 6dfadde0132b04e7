#include "engine/request.h"

namespace qinfer {

bool RequestStream::wait_drain(std::vector<StreamDelta>& out, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  auto ready = [&] { return !deltas_.empty() || closed_; };
  // A zero timeout (an event loop's poll) never touches the condition variable: a timed wait that has already
  // expired still costs a futex call and a context switch, once per drain that finds nothing.
  if (!timeout)
    ready_.wait(lock, ready);
  else if (timeout->count() > 0)
    ready_.wait_for(lock, *timeout, ready);
  bool had_any = !deltas_.empty();
  for (StreamDelta& delta : deltas_) out.push_back(std::move(delta));
  deltas_.clear();
  return had_any || !closed_;
}

bool RequestStream::done() const {
  std::lock_guard lock(mutex_);
  return closed_ && deltas_.empty();
}

Usage RequestStream::usage() const {
  std::lock_guard lock(mutex_);
  return usage_;
}

std::optional<std::chrono::steady_clock::time_point> RequestStream::first_scheduled() const {
  std::lock_guard lock(mutex_);
  return first_scheduled_;
}

void RequestStream::mark_scheduled(std::chrono::steady_clock::time_point when) {
  std::lock_guard lock(mutex_);
  if (!first_scheduled_) first_scheduled_ = when;
}

void RequestStream::push(StreamDelta delta) {
  {
    std::lock_guard lock(mutex_);
    deltas_.push_back(std::move(delta));
  }
  ready_.notify_all();
}

void RequestStream::set_usage(const Usage& usage) {
  std::lock_guard lock(mutex_);
  usage_ = usage;
}

void RequestStream::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

}  // namespace qinfer
