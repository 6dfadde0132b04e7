// One blocking HTTP GET through a libcurl easy handle: for GET /v1/models and the /metrics sampler, not for the
// measured streams (those go through StreamClient's event loop). curl_global_init must have run (CurlSession).
#pragma once

#include <string>

namespace qinfer::loadgen {

// Owns libcurl's process-wide initialisation; create one before any other thread uses curl.
class CurlSession {
 public:
  CurlSession();
  ~CurlSession();
  CurlSession(const CurlSession&) = delete;
  CurlSession& operator=(const CurlSession&) = delete;
};

struct HttpResponse {
  long status = 0;  // HTTP status; 0 when no response came
  std::string body;
  std::string error;  // libcurl's message when the transfer failed (connect error, timeout)
};

// api_key: sent as `Authorization: Bearer KEY` when not empty.
HttpResponse http_get(const std::string& url, const std::string& api_key, double timeout_seconds);

}  // namespace qinfer::loadgen
