#include "server/api_error.h"

#include <array>
#include <string_view>

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
    case ErrorKind::kUnsupported: {
      // The engine's and the sampler's messages start with the field they refuse ("top_p must be ...").
      static constexpr std::array<std::string_view, 15> kFields = {"temperature",
                                                                   "top_k",
                                                                   "top_p",
                                                                   "min_p",
                                                                   "repetition_penalty",
                                                                   "presence_penalty",
                                                                   "frequency_penalty",
                                                                   "top_logprobs",
                                                                   "max_tokens",
                                                                   "n",
                                                                   "stop_token_ids",
                                                                   "prompt",
                                                                   "stop",
                                                                   "each",
                                                                   "priority"};
      std::string_view message = error.what();
      std::string_view first = message.substr(0, message.find(' '));
      std::optional<std::string> param;
      for (std::string_view field : kFields)
        if (first == field) param = first == "each" ? "stop" : std::string(first);
      return ApiError(400, "invalid_request_error", error.what(), param);
    }
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
