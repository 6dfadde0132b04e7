#include "util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "util/byte_size.h"
#include "util/logging.h"

namespace qinfer {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ProgressReporter::ProgressReporter(std::string what, int64_t total_bytes, Style style)
    : what_(std::move(what)), total_(std::max<int64_t>(1, total_bytes)), start_(std::chrono::steady_clock::now()) {
  enabled_ = spdlog::should_log(spdlog::level::info);
  bar_ = style == Style::kBar || (style == Style::kAuto && isatty(STDERR_FILENO) == 1);
  last_draw_ = start_;
}

ProgressReporter::~ProgressReporter() {
  if (!finished_) finish();
}

std::string ProgressReporter::render_bar(int64_t done, int64_t total, double seconds) {
  const double fraction =
      std::clamp(static_cast<double>(done) / static_cast<double>(std::max<int64_t>(1, total)), 0.0, 1.0);
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar = "[";
  for (int i = 0; i < kBarWidth; ++i) bar += i < filled ? '=' : i == filled ? '>' : ' ';
  bar += "] ";
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
  bar += percent;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on `" " + std::string`.
  bar.append(" ").append(format_bytes(done)).append(" / ").append(format_bytes(total));
  if (seconds > 0)
    bar.append(" ").append(format_bytes(static_cast<int64_t>(static_cast<double>(done) / seconds))).append("/s");
  return bar;
}

void ProgressReporter::advance(int64_t bytes) {
  std::lock_guard lock(mutex_);
  done_ = std::min(total_, done_ + bytes);
  draw_locked(false);
}

void ProgressReporter::draw_locked(bool final_draw) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (bar_) {
    if (!final_draw && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r%s: %s%s", what_.c_str(), render_bar(done_, total_, seconds_since(start_)).c_str(),
                 final_draw ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  const int tenth = static_cast<int>(done_ * 10 / total_);
  if (final_draw || tenth <= last_tenth_ || tenth >= 10) return;
  last_tenth_ = tenth;
  spdlog::info("{}: {}% ({} of {})", what_, tenth * 10, format_bytes(done_), format_bytes(total_));
}

double ProgressReporter::finish() {
  std::lock_guard lock(mutex_);
  const double seconds = seconds_since(start_);
  if (finished_) return seconds;
  finished_ = true;
  if (bar_) draw_locked(true);
  if (enabled_)
    spdlog::info("{}: {} in {:.2f} s ({}/s)", what_, format_bytes(done_), seconds,
                 format_bytes(static_cast<int64_t>(static_cast<double>(done_) / std::max(seconds, 1e-9))));
  return seconds;
}

}  // namespace qinfer
