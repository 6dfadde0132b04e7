// One blocking HTTP request through a libcurl easy handle: the client side of `bench serve`'s side requests
// (GET /v1/models, /metrics) and of model downloads (hub API calls, file bodies streamed to disk).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/curl_api.h"

namespace qinfer {

struct HttpRequest {
  std::string url;
  bool head = false;                 // HEAD instead of GET
  std::vector<std::string> headers;  // "Name: value" lines
  bool follow_redirects = false;     // curl follows 3xx (never re-sending our headers' credentials to another host)
  double timeout_seconds = 0;        // whole transfer; 0: none (a large file)
  double connect_timeout_seconds = 30;
  // Abort a transfer that moved less than 1 byte/s for this long (a stalled CDN connection); 0: never.
  double stall_timeout_seconds = 0;
  // Receives the body of a 2xx response chunk by chunk with that response's status (200, or 206 for a range);
  // returns false to abort (a failed write). Without it the body collects in HttpResponse::body. Bodies of other
  // statuses (error JSON) always go to HttpResponse::body.
  std::function<bool(long status, const char* data, size_t size)> on_body;
};

struct HttpResponse {
  long status = 0;  // HTTP status of the last response; 0 when none came
  // Headers of the last response (after followed redirects), names lower-cased, values trimmed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  CURLcode code = CURLE_OK;  // transfer result; not OK also when on_body refused data (CURLE_WRITE_ERROR)
  std::string error;         // libcurl's message when code is not OK

  // The first header of that (lower-case) name, or "" when absent.
  const std::string& header(const std::string& name) const;
};

HttpResponse http_request(const CurlApi& curl, const HttpRequest& request);

// Percent-encodes every byte outside [A-Za-z0-9-._~] (a URL path segment or query value).
std::string url_escape(const CurlApi& curl, const std::string& text);

}  // namespace qinfer
