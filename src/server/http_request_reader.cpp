#include "server/http_request_reader.h"

#include <boost/asio/error.hpp>
#include <iterator>

namespace qinfer::server {

namespace http = boost::beast::http;

void configure_parser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);  // counts chunked bodies too; a Content-Length over it fails at once
}

std::optional<ReadRefusal> refusal_for(const boost::beast::error_code& error, bool request_line_read,
                                       const HttpLimits& limits) {
  if (error == http::error::header_limit || error == http::error::buffer_overflow) {
    if (!request_line_read)
      return ReadRefusal{
          414, "the request line exceeds --max-header-bytes (" + std::to_string(limits.max_header_bytes) + " bytes)"};
    return ReadRefusal{
        431, "the request headers exceed --max-header-bytes (" + std::to_string(limits.max_header_bytes) + " bytes)"};
  }
  if (error == http::error::body_limit)
    return ReadRefusal{
        413, "the request body exceeds --max-body-bytes (" + std::to_string(limits.max_body_bytes) + " bytes)"};
  if (error == boost::beast::error::timeout)
    return ReadRefusal{408,
                       "the request was not received in time (--header-timeout for the headers, "
                       "--read-timeout for the body)"};
  if (error.category() == http::make_error_code(http::error::bad_target).category())  // any other parse error
    return ReadRefusal{400, "malformed HTTP request: " + error.message()};
  return std::nullopt;  // end of stream, reset, cancelled
}

std::optional<ReadRefusal> check_head(const RequestParser& parser, const HttpLimits& limits) {
  const auto& head = parser.get();
  if (head.target().size() > limits.max_target_bytes)
    return ReadRefusal{414, "the request target exceeds " + std::to_string(limits.max_target_bytes) + " bytes"};
  if (static_cast<size_t>(std::distance(head.begin(), head.end())) > limits.max_header_count)
    return ReadRefusal{431, "the request has more than --max-header-count (" + std::to_string(limits.max_header_count) +
                                ") header lines"};
  if (head.version() != 11 && head.version() != 10) return ReadRefusal{505, "HTTP version not supported"};
  return std::nullopt;
}

namespace {

// The path with its %XX escapes decoded (routes match decoded paths: an SDK sends the model id ORG/NAME as
// ORG%2FNAME). A '%' not followed by two hex digits stays as it is.
std::string decode_path(std::string_view path) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string decoded;
  decoded.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && hex(path[i + 1]) >= 0 && hex(path[i + 2]) >= 0) {
      decoded += static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
      i += 2;
    } else {
      decoded += path[i];
    }
  }
  return decoded;
}

}  // namespace

HttpRequest to_http_request(RequestParser::value_type&& message) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const size_t query = request.target.find('?');
  request.path = decode_path(std::string_view(request.target).substr(0, query));
  for (const auto& field : message) request.headers.emplace_back(field.name_string(), field.value());
  request.body = std::move(message.body());
  return request;
}

}  // namespace qinfer::server
