// Reading one HTTP/1.1 request with Boost.Beast's parser under the server's limits. Everything here runs before
// routing and auth: a request over a limit is refused from what was read so far (never buffered whole) and its
// connection closed. Shared by the event loop (http_session.cpp) and the request fuzz target.
#pragma once

#include <boost/beast/http.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace qinfer::server {

struct HttpLimits {
  size_t max_target_bytes = 8192;       // request target (414 beyond)
  size_t max_header_bytes = 64u << 10;  // request line + every header line (431 beyond; 414 for the line alone)
  size_t max_header_count = 100;        // header lines (431 beyond)
  size_t max_body_bytes = 4u << 20;     // body, chunked or not (413 beyond)
  std::chrono::milliseconds header_timeout{10000};     // from the first byte to the end of the headers
  std::chrono::milliseconds body_timeout{30000};       // from the end of the headers to the end of the body
  std::chrono::milliseconds keep_alive_timeout{5000};  // idle wait for the next request
  std::chrono::milliseconds write_timeout{30000};      // a response write; a stream's chunk
};

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

void configure_parser(RequestParser& parser, const HttpLimits& limits);

// Why a request is answered with an error before any handler sees it.
struct ReadRefusal {
  int status;
  std::string message;
};

// For a failed read: the answer to send, or nullopt when the connection just closes (the client went away).
// `request_line_read` tells overlong headers (431) from an overlong request line (414).
std::optional<ReadRefusal> refusal_for(const boost::beast::error_code& error, bool request_line_read,
                                       const HttpLimits& limits);
// Whether the parser got past the request line (its target is set then).
inline bool request_line_read(const RequestParser& parser) { return !parser.get().target().empty(); }
// After the headers: the limits Beast's parser does not check itself (target length, header count).
std::optional<ReadRefusal> check_head(const RequestParser& parser, const HttpLimits& limits);

HttpRequest to_http_request(RequestParser::value_type&& message);

}  // namespace qinfer::server
