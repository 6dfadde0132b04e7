#include "server/engine_watchdog.h"

#include "util/logging.h"

namespace qinfer::server {

EngineWatchdog::EngineWatchdog(const Engine& engine, double stall_seconds)
    : engine_(engine), stall_seconds_(stall_seconds), thread_([this] { run(); }) {}

EngineWatchdog::~EngineWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EngineWatchdog::run() {
  using Clock = std::chrono::steady_clock;
  uint64_t last_steps = engine_.stats().scheduler.steps;
  Clock::time_point last_progress = Clock::now();
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping_; })) {
    EngineStats stats = engine_.stats();
    const Clock::time_point now = Clock::now();
    if (stats.scheduler.steps != last_steps || stats.num_running + stats.num_waiting == 0) last_progress = now;
    last_steps = stats.scheduler.steps;
    const bool progressing = std::chrono::duration<double>(now - last_progress).count() < stall_seconds_;
    if (progressing != progressing_.exchange(progressing))
      progressing ? spdlog::info("engine loop progressing again")
                  : spdlog::error("engine loop stalled: work queued but no step for {:.0f} s", stall_seconds_);
  }
}

}  // namespace qinfer::server
