// One line per event with a level, through spdlog's default logger, set up by init_logging (safe to call again).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace qinfer {

// level: trace|debug|info|warn|error|off. Logs go to stderr so stdout stays machine-readable.
void init_logging(std::string_view level);

}  // namespace qinfer
