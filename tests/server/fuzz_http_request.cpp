// libFuzzer target: any byte string read as an HTTP request under small limits (http_request_reader.h) is parsed,
// refused with a status, or left incomplete; never a crash, a hang, or a request past the limits handed on.
#include <cstddef>
#include <cstdint>

#include "server/http_request_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace beast = boost::beast;
  qinfer::server::HttpLimits limits;
  limits.max_target_bytes = 64;
  limits.max_header_bytes = 512;
  limits.max_header_count = 8;
  limits.max_body_bytes = 256;
  qinfer::server::RequestParser parser;
  qinfer::server::configure_parser(parser, limits);
  parser.eager(true);
  // Fed in pieces of varying size, as reads deliver them: the first byte picks the piece size.
  const size_t piece = size > 0 ? 1 + data[0] % 64 : 1;
  size_t offset = size > 0 ? 1 : 0;
  std::string pending;
  beast::error_code error;
  while (offset < size && !parser.is_done()) {
    const size_t take = std::min(piece, size - offset);
    pending.append(reinterpret_cast<const char*>(data + offset), take);
    offset += take;
    const size_t used = parser.put(boost::asio::buffer(pending), error);
    pending.erase(0, used);  // what the parser took, even when it needs more (as Beast's own read loop does)
    if (error == beast::http::error::need_more) {
      error = {};
      if (pending.size() > limits.max_header_bytes + limits.max_body_bytes + 1024) __builtin_trap();
      continue;
    }
    if (error) break;
    if (parser.is_header_done() && qinfer::server::check_head(parser, limits)) return 0;
  }
  if (error) {
    const auto refusal = qinfer::server::refusal_for(error, qinfer::server::request_line_read(parser), limits);
    if (refusal && (refusal->status < 400 || refusal->status > 599)) __builtin_trap();
    return 0;
  }
  if (parser.is_done()) {
    if (parser.get().body().size() > limits.max_body_bytes) __builtin_trap();
    const qinfer::server::HttpRequest request = qinfer::server::to_http_request(parser.release());
    if (request.path.size() > request.target.size()) __builtin_trap();
  }
  return 0;
}
