// One blocking HTTP GET for GET /v1/models and the /metrics sampler, not for the measured streams (those go through
// StreamClient's event loop).
#pragma once

#include <string>

#include "util/http_request.h"

namespace qinfer::loadgen {

// api_key: sent as `Authorization: Bearer KEY` when not empty. A failed transfer has status 0 and `error` set.
HttpResponse http_get(const CurlApi& curl, const std::string& url, const std::string& api_key, double timeout_seconds);

}  // namespace qinfer::loadgen
