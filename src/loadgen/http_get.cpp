#include "loadgen/http_get.h"

namespace qinfer::loadgen {

HttpResponse http_get(const CurlApi& curl, const std::string& url, const std::string& api_key, double timeout_seconds) {
  HttpRequest request;
  request.url = url;
  if (!api_key.empty()) request.headers.push_back("Authorization: Bearer " + api_key);
  request.timeout_seconds = timeout_seconds;
  request.connect_timeout_seconds = timeout_seconds;
  HttpResponse response = http_request(curl, request);
  if (response.code != CURLE_OK) response.status = 0;
  return response;
}

}  // namespace qinfer::loadgen
