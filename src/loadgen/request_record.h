// What the load generator measured for one streamed request. Times are seconds from a steady clock.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace qinfer::loadgen {

// Error kinds, as they appear in reports ("http_<status>" for answers other than 200).
inline constexpr const char* kErrorConnect = "connect";        // no connection (refused, unresolved)
inline constexpr const char* kErrorTimeout = "timeout";        // --request-timeout passed
inline constexpr const char* kErrorDisconnect = "disconnect";  // connection lost or stream ended before [DONE]
inline constexpr const char* kErrorStream = "stream_error";    // an error event (or non-JSON data) inside the stream
inline constexpr const char* kErrorOther = "other";            // any other transport failure

struct RequestRecord {
  double start_s = 0;                           // when the request was sent, from the start of its load level
  double latency_s = 0;                         // end to end: sent → last byte
  std::vector<double> text_arrivals_s;          // from the request's start: one per event that carried output text
  std::optional<long> usage_prompt_tokens;      // from the server's usage, when it sent one
  std::optional<long> usage_completion_tokens;  //
  std::string error_kind;                       // empty on success; one of the kinds above or "http_<status>"
  std::string error_message;                    // the start of the error body or libcurl's message

  bool ok() const { return error_kind.empty(); }
  // Output tokens: the server's usage when present, else one per text event.
  long output_tokens() const { return usage_completion_tokens.value_or(static_cast<long>(text_arrivals_s.size())); }
};

}  // namespace qinfer::loadgen
