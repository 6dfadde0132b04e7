// Progress of a benchmark on stderr: a bar redrawn in place when stderr is a terminal, else one plain line per
// finished level (so logs and CI output stay readable).
#pragma once

#include <cstdio>
#include <string>

#include "loadgen/bench_report.h"
#include "loadgen/stream_client.h"

namespace qinfer::loadgen {

class ProgressDisplay {
 public:
  // interactive: draw the bar (normally isatty(fileno(out))).
  ProgressDisplay(std::FILE* out, bool interactive) : out_(out), interactive_(interactive) {}

  void update(const std::string& level, int total, const LoadProgress& progress);
  void level_done(const LevelResult& level);

 private:
  std::FILE* out_;
  bool interactive_;
  long last_text_events_ = 0;
  double last_elapsed_s_ = 0;
};

}  // namespace qinfer::loadgen
