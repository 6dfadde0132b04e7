// Progress of long work measured in bytes (weight generation, loading, upload to the GPU). On a terminal: one bar on
// stderr, redrawn in place; otherwise (a log file, journald): an info line at every tenth, so logs stay one line per
// event. Nothing is drawn when the info level is off. Thread-safe: workers may advance it concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace qinfer {

class ProgressReporter {
 public:
  enum class Style { kAuto, kBar, kLines };  // kAuto: a bar when stderr is a terminal

  // `what` names the work ("loading weights"); `total_bytes` > 0.
  ProgressReporter(std::string what, int64_t total_bytes, Style style = Style::kAuto);
  ~ProgressReporter();  // finishes if finish() was not called
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void advance(int64_t bytes);
  // Ends the bar and logs "WHAT: N bytes in T s (R/s)". Returns the seconds since construction.
  double finish();

  // The bar as drawn for `done` of `total` bytes after `seconds`: "[=====>    ]  50% 4.02 GiB / 8.04 GiB 2.01 GiB/s".
  static std::string render_bar(int64_t done, int64_t total, double seconds);

 private:
  void draw_locked(bool final_draw);

  const std::string what_;
  const int64_t total_;
  const std::chrono::steady_clock::time_point start_;
  bool bar_ = false;
  bool enabled_ = false;
  std::mutex mutex_;
  int64_t done_ = 0;
  int last_tenth_ = 0;
  std::chrono::steady_clock::time_point last_draw_;
  bool finished_ = false;
};

}  // namespace qinfer
