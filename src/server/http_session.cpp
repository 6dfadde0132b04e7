#include "server/http_session.h"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>

namespace qinfer::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// An SSE comment on a stream with nothing written for this long: clients ignore it, proxies keep the connection.
constexpr std::chrono::milliseconds kKeepAliveInterval{1000};
constexpr std::string_view kKeepAliveComment = ": keep-alive\n\n";
// After a response that closes the connection, what the client still sends is read and dropped for at most this long,
// so that the kernel does not answer it with a reset that could destroy the response before the client reads it.
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kReadChunk = 4096;

template <typename Message>
void fill_head(Message& message, const HttpResponse& response, bool keep_alive) {
  message.result(static_cast<unsigned>(response.status));
  for (const auto& [name, value] : response.headers)
    if (!beast::iequals(name, "Connection")) message.insert(name, value);
  if (!response.content_type.empty()) message.set(http::field::content_type, response.content_type);
  message.keep_alive(keep_alive);
}

}  // namespace

void SessionRegistry::add(const std::shared_ptr<HttpSession>& session) {
  std::lock_guard lock(mutex_);
  sessions_.emplace(session.get(), session);
}

void SessionRegistry::remove(const HttpSession* session) {
  std::lock_guard lock(mutex_);
  sessions_.erase(session);
}

size_t SessionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

std::vector<std::shared_ptr<HttpSession>> SessionRegistry::live_sessions() const {
  std::vector<std::shared_ptr<HttpSession>> open;
  std::lock_guard lock(mutex_);
  for (const auto& [key, weak] : sessions_)
    if (auto session = weak.lock()) open.push_back(std::move(session));
  return open;
}

void SessionRegistry::drain_all() {
  for (auto& session : live_sessions()) session->drain();
}

void SessionRegistry::close_all() {
  for (auto& session : live_sessions()) session->close();
}

HttpSession::HttpSession(net::ip::tcp::socket socket, SessionHost& host, SessionRegistry& registry)
    : stream_(std::move(socket)),
      stream_timer_(stream_.get_executor()),
      read_timer_(stream_.get_executor()),
      // Room for the headers plus one read: the parser's header limit, not the buffer, is what refuses.
      buffer_(host.limits().max_header_bytes + 2 * kReadChunk),
      host_(host),
      registry_(registry),
      limits_(host.limits()) {}

HttpSession::~HttpSession() {
  registry_.remove(this);
  if (event_stream_) event_stream_->finish(false);
}

void HttpSession::start() {
  registry_.add(shared_from_this());
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
}

void HttpSession::drain() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->drain_requested_ = true;
    if (self->phase_ == Phase::kReading) self->shut();
  });
}

void HttpSession::close() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->shut(); });
}

void HttpSession::wait_for_request() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kReading;
  if (drain_requested_ || host_.draining()) return shut();
  // The first request's deadline starts at accept; later ones' when their first byte arrives after the idle wait.
  if (first_request_ || buffer_.size() > 0) return read_header();
  arm_read_deadline(limits_.keep_alive_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](const beast::error_code& error, size_t bytes) {
                            self->buffer_.commit(bytes);
                            self->read_timer_.cancel();
                            if (error) return self->shut();
                            self->read_header();
                          });
}

void HttpSession::read_header() {
  parser_.emplace();
  configure_parser(*parser_, limits_);
  arm_read_deadline(limits_.header_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](const beast::error_code& error, size_t) { self->on_header(error); });
}

void HttpSession::on_header(const beast::error_code& error) {
  if (phase_ == Phase::kClosed) return;
  if (read_timed_out(error)) return refuse(*refusal_for(beast::error::timeout, true, limits_));
  if (error) {
    if (std::optional<ReadRefusal> refusal = refusal_for(error, request_line_read(*parser_), limits_))
      return refuse(*refusal);
    return shut();
  }
  if (std::optional<ReadRefusal> refusal = check_head(*parser_, limits_)) return refuse(*refusal);
  if (beast::iequals(parser_->get()[http::field::expect], "100-continue") && !parser_->is_done()) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(limits_.write_timeout);
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](const beast::error_code& write_error, size_t) {
                       if (write_error) return self->shut();
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void HttpSession::read_body() {
  if (parser_->is_done()) return handle();
  arm_read_deadline(limits_.body_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](const beast::error_code& error, size_t) { self->on_body(error); });
}

void HttpSession::on_body(const beast::error_code& error) {
  if (phase_ == Phase::kClosed) return;
  if (read_timed_out(error)) return refuse(*refusal_for(beast::error::timeout, true, limits_));
  if (error) {
    if (std::optional<ReadRefusal> refusal = refusal_for(error, true, limits_)) return refuse(*refusal);
    return shut();
  }
  handle();
}

void HttpSession::refuse(const ReadRefusal& refusal) {
  keep_alive_ = false;
  parser_.reset();
  write_response(host_.refusal(refusal));
}

void HttpSession::handle() {
  phase_ = Phase::kHandling;
  keep_alive_ = parser_->keep_alive();
  auto request = std::make_shared<HttpRequest>(to_http_request(parser_->release()));
  parser_.reset();
  peer_closed_ = std::make_shared<std::atomic<bool>>(false);
  request->peer_closed = peer_closed_;
  stream_.expires_never();
  if (!watching_peer_) watch_peer();
  host_.dispatch(std::move(request), [self = shared_from_this()](HttpResponse response) {
    net::post(self->stream_.get_executor(),
              [self, response = std::move(response)]() mutable { self->write_response(std::move(response)); });
  });
}

// One wait for readability at a time. A peek then tells a closed connection (0 bytes or an error) from a pipelined
// next request (data: stop watching; the next write notices a client gone after that).
void HttpSession::watch_peer() {
  watching_peer_ = true;
  stream_.socket().async_wait(net::socket_base::wait_read, [self = shared_from_this()](const beast::error_code& error) {
    self->watching_peer_ = false;
    if (error || (self->phase_ != Phase::kHandling && self->phase_ != Phase::kStreaming)) return;
    char byte = 0;
    const ssize_t got = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0) return;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch_peer();
    self->peer_closed_->store(true, std::memory_order_release);
    if (self->phase_ == Phase::kStreaming) self->end_stream(false);
  });
}

void HttpSession::write_response(HttpResponse response) {
  host_.count_status(response.status);
  if (phase_ == Phase::kClosed) {
    if (response.stream) response.stream->finish(false);
    return;
  }
  if (response.close_connection || drain_requested_ || host_.draining()) keep_alive_ = false;
  if (response.stream) {
    event_stream_ = std::move(response.stream);
    auto head = std::make_shared<http::response<http::empty_body>>();
    fill_head(*head, response, keep_alive_);
    head->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*head);
    phase_ = Phase::kWriting;
    stream_.expires_after(limits_.write_timeout);
    http::async_write_header(stream_, *serializer,
                             [self = shared_from_this(), head, serializer](const beast::error_code& error, size_t) {
                               if (error) return self->shut();
                               self->start_stream();
                             });
    return;
  }
  auto message = std::make_shared<http::response<http::string_body>>();
  fill_head(*message, response, keep_alive_);
  message->body() = std::move(response.body);
  message->prepare_payload();
  phase_ = Phase::kWriting;
  stream_.expires_after(limits_.write_timeout);
  http::async_write(stream_, *message, [self = shared_from_this(), message](const beast::error_code& error, size_t) {
    if (error) return self->shut();
    self->after_response();
  });
}

void HttpSession::after_response() {
  first_request_ = false;
  if (keep_alive_) return wait_for_request();
  // Graceful close: our side done, the client's remaining bytes read and dropped for a bounded time.
  phase_ = Phase::kWriting;
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  stream_.expires_after(kLingerTime);
  struct Discard {
    std::shared_ptr<HttpSession> self;
    void operator()(const beast::error_code& error, size_t) const {
      self->buffer_.consume(self->buffer_.size());
      if (error) return self->shut();
      self->stream_.async_read_some(self->buffer_.prepare(kReadChunk), *this);
    }
  };
  stream_.async_read_some(buffer_.prepare(kReadChunk), Discard{shared_from_this()});
}

void HttpSession::start_stream() {
  phase_ = Phase::kStreaming;
  stream_finished_ = false;
  last_stream_write_ = std::chrono::steady_clock::now();
  stream_.expires_never();
  event_stream_->wakeup().attach([weak = weak_from_this()] {
    if (auto self = weak.lock()) net::post(self->stream_.get_executor(), [self] { self->pump_stream(); });
  });
  if (!watching_peer_) watch_peer();
  arm_keep_alive_timer();
  pump_stream();
}

void HttpSession::pump_stream() {
  if (phase_ != Phase::kStreaming || stream_writing_ || stream_finished_) return;
  event_stream_->wakeup().clear();  // before taking: what arrives later wakes us again
  stream_out_.clear();
  stream_finished_ = event_stream_->take_events(stream_out_);
  if (stream_out_.empty() && !stream_finished_) return;
  stream_writing_ = true;
  stream_.expires_after(limits_.write_timeout);
  auto done = [self = shared_from_this()](const beast::error_code& error, size_t) { self->on_stream_written(error); };
  if (!stream_finished_)
    net::async_write(stream_, http::make_chunk(net::buffer(stream_out_)), std::move(done));
  else if (stream_out_.empty())
    net::async_write(stream_, http::make_chunk_last(), std::move(done));
  else
    net::async_write(stream_, beast::buffers_cat(http::make_chunk(net::buffer(stream_out_)), http::make_chunk_last()),
                     std::move(done));
}

void HttpSession::on_stream_written(const beast::error_code& error) {
  stream_writing_ = false;
  if (phase_ != Phase::kStreaming) return;
  if (error) return end_stream(false);
  last_stream_write_ = std::chrono::steady_clock::now();
  stream_.expires_never();
  if (stream_finished_) return end_stream(true);
  pump_stream();
}

void HttpSession::arm_keep_alive_timer() {
  stream_timer_.expires_after(kKeepAliveInterval);
  stream_timer_.async_wait([self = shared_from_this()](const beast::error_code& error) {
    if (error || self->phase_ != Phase::kStreaming) return;
    if (!self->stream_writing_ && std::chrono::steady_clock::now() - self->last_stream_write_ >= kKeepAliveInterval) {
      self->stream_out_.assign(kKeepAliveComment);
      self->stream_writing_ = true;
      self->stream_.expires_after(self->limits_.write_timeout);
      net::async_write(self->stream_, http::make_chunk(net::buffer(self->stream_out_)),
                       [self](const beast::error_code& write_error, size_t) { self->on_stream_written(write_error); });
    }
    self->arm_keep_alive_timer();
  });
}

void HttpSession::end_stream(bool delivered) {
  if (!event_stream_) return;
  stream_timer_.cancel();
  event_stream_->wakeup().detach();
  std::shared_ptr<EventStream> finished = std::move(event_stream_);
  finished->finish(delivered);
  if (!delivered) return shut();
  after_response();
}

void HttpSession::arm_read_deadline(std::chrono::milliseconds timeout) {
  stream_.expires_never();
  read_expired_ = false;
  read_timer_.expires_after(timeout);
  read_timer_.async_wait([self = shared_from_this()](const beast::error_code& error) {
    if (error || self->phase_ != Phase::kReading) return;
    self->read_expired_ = true;
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);
  });
}

bool HttpSession::read_timed_out(const beast::error_code& error) {
  read_timer_.cancel();
  return error && read_expired_;
}

void HttpSession::shut() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  read_timer_.cancel();
  if (event_stream_) {
    stream_timer_.cancel();
    event_stream_->wakeup().detach();
    std::shared_ptr<EventStream> unfinished = std::move(event_stream_);
    unfinished->finish(false);
  }
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  registry_.remove(this);
}

}  // namespace qinfer::server
