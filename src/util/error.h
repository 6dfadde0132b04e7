// Typed errors. Programmer errors abort via QINFER_CHECK; user, request and file errors throw qinfer::Error with a
// kind that the CLI maps to an exit code and the server maps to an HTTP status.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace qinfer {

enum class ErrorKind {
  kInvalidArgument,  // bad flag or request field (HTTP 400, exit 2)
  kNotFound,         // missing file, directory, model or tensor (HTTP 404, exit 3)
  kFormat,           // malformed file content: config, safetensors, tokenizer.json (exit 4)
  kUnsupported,      // valid input we do not handle: architecture, dtype, rope type (exit 5)
  kOutOfMemory,      // model or KV cache does not fit (exit 6)
  kUnavailable,      // no GPU, server overloaded (HTTP 503/429, exit 7)
  kInternal,         // everything else (HTTP 500, exit 1)
};

int error_kind_exit_code(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // `field`: the request field the error is about ("top_p", "stop"), when the thrower knows it; the server sends it as
  // the OpenAI error's `param`.
  Error(ErrorKind kind, const std::string& message, std::string field = {})
      : std::runtime_error(message), kind_(kind), field_(std::move(field)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& field() const { return field_; }

 private:
  ErrorKind kind_;
  std::string field_;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& message);

}  // namespace qinfer

// Invariant that only a bug can break: prints file:line and aborts.
#define QINFER_CHECK(cond, ...)                                                                    \
  do {                                                                                             \
    if (!(cond)) ::qinfer::check_failed(#cond, __FILE__, __LINE__, ::std::string{"" __VA_ARGS__}); \
  } while (0)
