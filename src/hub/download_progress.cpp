#include "hub/download_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/logging.h"

namespace qinfer::hub {

namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(250);
constexpr int kBarWidth = 24;
}  // namespace

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", bytes, kUnits[unit]);
  return text;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const long s = std::lround(seconds);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof(text), "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(text, sizeof(text), "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof(text), "%lds", s);
  return text;
}

DownloadProgress::DownloadProgress(std::string title, bool bar) : title_(std::move(title)), bar_(bar) {
  if (bar_) drawer_ = std::thread([this] { draw_loop(); });
}

DownloadProgress::~DownloadProgress() {
  bool drawing = false;
  {
    std::lock_guard lock(mutex_);
    drawing = !finished_ && bar_;
    finished_ = true;
  }
  wake_.notify_all();
  if (drawer_.joinable()) drawer_.join();
  if (drawing) std::fputc('\n', stderr);  // a failed download: end the bar's line before the error message
}

void DownloadProgress::set_total(int64_t bytes, int files) {
  total_bytes_ = bytes;
  files_total_ = files;
  if (!bar_) spdlog::info("{}: {} in {} file(s) to download", title_, format_bytes(static_cast<double>(bytes)), files);
}

void DownloadProgress::file_done(const std::string& path, int64_t bytes) {
  ++files_done_;
  if (!bar_)
    spdlog::info("{}: {} done ({}, {}/{} files)", title_, path, format_bytes(static_cast<double>(bytes)),
                 files_done_.load(), files_total_.load());
}

void DownloadProgress::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  wake_.notify_all();
  if (drawer_.joinable()) drawer_.join();
  if (bar_) draw(true);
}

void DownloadProgress::draw_loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, kRedrawInterval, [this] { return finished_; })) draw(false);
}

void DownloadProgress::draw(bool final_line) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double done = static_cast<double>(std::max<int64_t>(0, done_bytes_.load()));
  const double total = static_cast<double>(total_bytes_.load());
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double fraction = total > 0 ? std::min(1.0, done / total) : (final_line ? 1.0 : 0.0);
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarWidth) bar += '>' + std::string(static_cast<size_t>(kBarWidth - filled - 1), ' ');
  const std::string eta = final_line ? format_duration(elapsed)
                          : rate > 0 ? format_duration((total - done) / rate)
                                     : "--";
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %s / %s  %s/s  %s %s  %d/%d files\x1b[K%s", title_.c_str(), bar.c_str(),
               fraction * 100, format_bytes(done).c_str(), format_bytes(total).c_str(), format_bytes(rate).c_str(),
               final_line ? "in" : "ETA", eta.c_str(), files_done_.load(), files_total_.load(), final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace qinfer::hub
