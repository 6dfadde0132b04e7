// Progress of a model download across its parallel file transfers: on a terminal a bar redrawn in place on stderr
// (bytes done of total, rate, ETA, files), else one log line per finished file. Thread-safe: transfers call add()
// from their own threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace qinfer::hub {

class DownloadProgress {
 public:
  DownloadProgress(std::string title, bool bar);
  ~DownloadProgress();
  DownloadProgress(const DownloadProgress&) = delete;
  DownloadProgress& operator=(const DownloadProgress&) = delete;

  // Bytes and files this download will transfer (files already cached are not counted).
  void set_total(int64_t bytes, int files);
  // Bytes that landed (negative when a transfer had to start over).
  void add(int64_t bytes) { done_bytes_ += bytes; }
  void file_done(const std::string& path, int64_t bytes);
  // Draws the final state and ends the line (the bar) or logs the summary.
  void finish();

 private:
  void draw(bool final_line);
  void draw_loop();

  const std::string title_;
  const bool bar_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<int64_t> done_bytes_{0};
  std::atomic<int64_t> total_bytes_{0};
  std::atomic<int> files_done_{0};
  std::atomic<int> files_total_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool finished_ = false;
  std::thread drawer_;
};

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);
// "1h02m", "3m05s", "42s"; "--" when unknown.
std::string format_duration(double seconds);

}  // namespace qinfer::hub
