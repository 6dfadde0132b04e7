// One client connection on the HTTP layer's event loop (Boost.Beast over Asio). A connection costs memory, not a
// thread: it reads a request under HttpLimits (overall deadlines for the headers and for the body, not per read),
// hands it to the host, writes the response, and goes on with the next request (keep-alive; pipelined requests are
// answered in order). A streamed response is written by the same loop: each wake-up of its EventStream drains every
// event ready into one chunk, and a client that hangs up, stops reading or times out ends the stream (the handler
// aborts the engine request). While a request is being handled the socket is watched for the client closing it.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/http_message.h"
#include "server/http_request_reader.h"

namespace qinfer::server {

class HttpSession;

// What sessions need from the server.
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  virtual const HttpLimits& limits() const = 0;
  virtual bool draining() const = 0;
  // Routes and handles `request`; calls `respond` exactly once, from any thread.
  virtual void dispatch(std::shared_ptr<HttpRequest> request, std::function<void(HttpResponse)> respond) = 0;
  // The response to a request refused while reading (error JSON).
  virtual HttpResponse refusal(const ReadRefusal& refusal) = 0;
  virtual void count_status(int status) = 0;
};

// The open sessions, so that shutdown can close them. Thread-safe.
class SessionRegistry {
 public:
  void add(const std::shared_ptr<HttpSession>& session);
  void remove(const HttpSession* session);
  size_t size() const;
  // Each open session's `drain()` (idle and half-read connections close) or `close()`.
  void drain_all();
  void close_all();

 private:
  // The sessions still alive, taken under the lock so that drain() and close() run without it.
  std::vector<std::shared_ptr<HttpSession>> live_sessions() const;
  mutable std::mutex mutex_;
  std::unordered_map<const HttpSession*, std::weak_ptr<HttpSession>> sessions_;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, SessionHost& host, SessionRegistry& registry);
  ~HttpSession();

  void start();
  // Any thread: close now if no request is being handled or streamed; otherwise after its response.
  void drain();
  // Any thread: close now (a stream in progress ends undelivered).
  void close();

 private:
  enum class Phase { kReading, kHandling, kWriting, kStreaming, kClosed };

  void wait_for_request();
  void read_header();
  void on_header(const boost::beast::error_code& error);
  void read_body();
  void on_body(const boost::beast::error_code& error);
  void refuse(const ReadRefusal& refusal);
  void handle();
  void watch_peer();
  void write_response(HttpResponse response);
  void after_response();
  void start_stream();
  void pump_stream();
  void on_stream_written(const boost::beast::error_code& error);
  void arm_keep_alive_timer();
  void end_stream(bool delivered);
  void shut();
  // Reads run under their own timer (not tcp_stream's, which closes the socket): a request too slow gets its 408.
  void arm_read_deadline(std::chrono::milliseconds timeout);
  bool read_timed_out(const boost::beast::error_code& error);

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer stream_timer_;  // keep-alive comments on an idle stream
  boost::asio::steady_timer read_timer_;    // the deadline of the idle wait, the headers or the body
  bool read_expired_ = false;
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  SessionHost& host_;
  SessionRegistry& registry_;
  const HttpLimits& limits_;
  Phase phase_ = Phase::kReading;
  bool first_request_ = true;
  bool keep_alive_ = true;
  bool drain_requested_ = false;
  bool watching_peer_ = false;
  std::shared_ptr<std::atomic<bool>> peer_closed_;
  // Streaming.
  std::shared_ptr<EventStream> event_stream_;
  std::string stream_out_;
  bool stream_writing_ = false;
  bool stream_finished_ = false;  // the last events were taken
  std::chrono::steady_clock::time_point last_stream_write_;
};

}  // namespace qinfer::server
