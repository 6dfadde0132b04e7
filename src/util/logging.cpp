#include "util/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

#include "util/error.h"

namespace qinfer {

void init_logging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off")
    throw Error(ErrorKind::kInvalidArgument, "unknown log level '" + std::string(level) + "'");
  // Idempotent: tests and tools may initialise more than once.
  auto logger = spdlog::get("qinfer");
  if (!logger) logger = spdlog::stderr_color_mt("qinfer");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
}

}  // namespace qinfer
