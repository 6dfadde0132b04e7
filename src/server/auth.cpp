#include "server/auth.h"

#include <cstdint>

namespace qinfer::server {

bool constant_time_equals(std::string_view expected, std::string_view provided) {
  // Every byte of the expected key is visited; differences are OR-ed, never branched on.
  volatile uint64_t difference = expected.size() ^ provided.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char given = i < provided.size() ? static_cast<unsigned char>(provided[i]) : 0;
    difference = difference | (static_cast<unsigned char>(expected[i]) ^ given);
  }
  return difference == 0;
}

bool bearer_authorized(std::string_view api_key, std::string_view authorization_header) {
  if (api_key.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization_header.size() < kScheme.size() || authorization_header.substr(0, kScheme.size()) != kScheme)
    return false;
  return constant_time_equals(api_key, authorization_header.substr(kScheme.size()));
}

}  // namespace qinfer::server
