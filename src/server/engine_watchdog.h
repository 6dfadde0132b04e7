// Watches the engine loop for /health: samples EngineStats twice a second and reports the loop stalled when it has
// work but its step counter has not moved for `stall_seconds`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace qinfer::server {

class EngineWatchdog {
 public:
  EngineWatchdog(const Engine& engine, double stall_seconds);
  ~EngineWatchdog();
  EngineWatchdog(const EngineWatchdog&) = delete;
  EngineWatchdog& operator=(const EngineWatchdog&) = delete;

  bool progressing() const { return progressing_.load(std::memory_order_relaxed); }

 private:
  void run();

  const Engine& engine_;
  const double stall_seconds_;
  std::atomic<bool> progressing_{true};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace qinfer::server
