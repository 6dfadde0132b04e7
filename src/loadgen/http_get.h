// One blocking HTTP GET through a libcurl easy handle: for GET /v1/models and the /metrics sampler, not for the
// measured streams (those go through StreamClient's event loop).
#pragma once

#include <string>

#include "loadgen/curl_api.h"

namespace qinfer::loadgen {

struct HttpResponse {
  long status = 0;  // HTTP status; 0 when no response came
  std::string body;
  std::string error;  // libcurl's message when the transfer failed (connect error, timeout)
};

// api_key: sent as `Authorization: Bearer KEY` when not empty.
HttpResponse http_get(const CurlApi& curl, const std::string& url, const std::string& api_key, double timeout_seconds);

}  // namespace qinfer::loadgen
