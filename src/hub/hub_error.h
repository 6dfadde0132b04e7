// Turning a failed hub request into an Error with a message that says what to do and the documented exit code:
// 401/403 -> kInvalidArgument (exit 2: gated or private, set a token), 404 -> kNotFound (3, naming the repo, revision
// or file), network failures, 429 and 5xx -> kUnavailable (7).
#pragma once

#include "hub/hub_options.h"
#include "hub/remote_repo.h"
#include "util/http_request.h"

namespace qinfer::hub {

// `response` came back with a status that is not 2xx (or no response at all: response.code not OK).
[[noreturn]] void throw_hub_error(const HubOptions& options, const HttpResponse& response, const HubTarget& target);

// True for failures worth another attempt: transfer errors (dropped connection, timeout), 408, 429 and 5xx.
bool is_retryable(const HttpResponse& response);

}  // namespace qinfer::hub
