#include "server/api_error.h"

namespace qinfer::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json error = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (param_) error["param"] = *param_;
  if (code_) error["code"] = *code_;
  return {{"error", std::move(error)}};
}

ApiError invalid_field(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", message, param);
}

ApiError api_error_from(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kFormat:
    case ErrorKind::kUnsupported:
      return ApiError(400, "invalid_request_error", error.what(),
                      error.field().empty() ? std::nullopt : std::optional<std::string>(error.field()));
    case ErrorKind::kNotFound:
      return ApiError(404, "not_found_error", error.what());
    case ErrorKind::kOutOfMemory:
    case ErrorKind::kUnavailable:
      return ApiError(503, "service_unavailable", error.what());
    case ErrorKind::kInternal:
      break;
  }
  return ApiError(500, "internal_error", error.what());
}

}  // namespace qinfer::server
