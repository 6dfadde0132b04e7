// Bearer-token check for the API key. The comparison takes the same time wherever the first mismatching byte is, so
// response timing does not reveal how much of a guessed key was right.
#pragma once

#include <string_view>

namespace qinfer::server {

bool constant_time_equals(std::string_view expected, std::string_view provided);

// True when no key is configured, or `authorization_header` is exactly "Bearer <key>".
bool bearer_authorized(std::string_view api_key, std::string_view authorization_header);

}  // namespace qinfer::server
