#include "loadgen/progress_display.h"

namespace qinfer::loadgen {

namespace {
constexpr int kBarWidth = 30;
}

void ProgressDisplay::update(const std::string& level, int total, const LoadProgress& progress) {
  if (!interactive_) return;
  if (progress.elapsed_s < last_elapsed_s_) last_text_events_ = 0;  // a new level started
  const double interval = progress.elapsed_s - last_elapsed_s_;
  const double events_per_second =
      interval > 0 ? static_cast<double>(progress.text_events - last_text_events_) / interval : 0;
  last_text_events_ = progress.text_events;
  last_elapsed_s_ = progress.elapsed_s;
  const int filled = total > 0 ? kBarWidth * progress.finished / total : kBarWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::fprintf(out_, "\r\033[K%-12s [%s] %d/%d done, %d in flight, %d failed, %.0f events/s, %.1f s", level.c_str(),
               bar.c_str(), progress.finished, total, progress.started - progress.finished, progress.failed,
               events_per_second, progress.elapsed_s);
  std::fflush(out_);
}

void ProgressDisplay::level_done(const LevelResult& level) {
  if (interactive_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "bench serve %s: %d/%d ok, %.2f req/s, %.1f output tok/s, TTFT P50 %.1f ms, TPOT P50 %.2f ms\n",
               level_name(level).c_str(), level.completed, level.num_requests, level.request_throughput,
               level.output_throughput, level.ttft_ms ? level.ttft_ms->p50 : 0.0,
               level.tpot_ms ? level.tpot_ms->p50 : 0.0);
  std::fflush(out_);
  last_text_events_ = 0;
  last_elapsed_s_ = 0;
}

}  // namespace qinfer::loadgen
