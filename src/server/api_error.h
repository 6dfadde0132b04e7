// OpenAI-shaped API errors: one exception type that every handler throws and one wrapper turns into
// {"error": {"message", "type", "param", "code"}} with the HTTP status it carries.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace qinfer::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt)
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::optional<std::string>& param() const { return param_; }
  const std::optional<std::string>& code() const { return code_; }

  // {"error": {...}}; param and code are null when absent, as OpenAI sends them.
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_;
  std::optional<std::string> param_;
  std::optional<std::string> code_;
};

// What a generation request hears (503 service_unavailable, or the error event of its stream) when the server drains
// before the request started: arriving, waiting for a slot or queued in the engine. Nothing of it ran, so a client may
// retry it elsewhere.
inline constexpr const char* kShutdownRefusal = "the server is shutting down; the request was not started";

// 400 invalid_request_error naming the offending field.
ApiError invalid_field(const std::string& param, const std::string& message);

// Maps a typed qinfer::Error to its HTTP status (400 bad input, 404 not found, 503 unavailable, 500 otherwise); a 400's
// param is the error's field (Error::field()), null when it has none.
ApiError api_error_from(const Error& error);

}  // namespace qinfer::server
