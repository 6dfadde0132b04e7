#include "util/error.h"

#include <cstdio>
#include <cstdlib>

namespace qinfer {

int error_kind_exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return 2;
    case ErrorKind::kNotFound:
      return 3;
    case ErrorKind::kFormat:
      return 4;
    case ErrorKind::kUnsupported:
      return 5;
    case ErrorKind::kOutOfMemory:
      return 6;
    case ErrorKind::kUnavailable:
      return 7;
    case ErrorKind::kInternal:
      return 1;
  }
  return 1;
}

void check_failed(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "qinfer: internal check failed at %s:%d: %s %s\n", file, line, expr, message.c_str());
  std::abort();
}

}  // namespace qinfer
