// What the route handlers see of HTTP: a fully read request (its limits were enforced by the HTTP layer before any
// handler or auth ran) and the response they fill in. A streamed response carries an EventStream instead of a body;
// the HTTP layer's event loop writes it (http_session.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qinfer::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive (HTTP field names); the first match.
const std::string* find_header(const HttpHeaders& headers, std::string_view name);

struct HttpRequest {
  std::string method;
  std::string target;  // as sent
  std::string path;    // target without the query, %XX escapes decoded
  HttpHeaders headers;
  std::string body;
  std::vector<std::string> matches;  // the route pattern's captures: [0] the whole path, then each group
  // Set by the event loop when the client closes its connection while the request is being handled.
  std::shared_ptr<const std::atomic<bool>> peer_closed = std::make_shared<std::atomic<bool>>(false);

  bool has_header(std::string_view name) const { return find_header(headers, name) != nullptr; }
  std::string get_header_value(std::string_view name) const;
  bool client_closed() const { return peer_closed->load(std::memory_order_acquire); }
};

// Tells the event loop that a stream has new events. Created before the engine request (whose output callback calls
// notify() from the first delta on); the event loop attaches itself once the response headers are sent.
class StreamWakeup {
 public:
  // Any thread. Cheap: one atomic exchange; the first notify after the loop drained the stream wakes it once.
  void notify();
  // Event loop: `wake` is called (from the notifying thread) when events are ready; right away when some already are.
  void attach(std::function<void()> wake);
  void detach();
  // Event loop, before draining: later notifies wake it again.
  void clear() { pending_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> pending_{false};
  std::mutex mutex_;
  std::function<void()> wake_;
};

// A streamed (SSE) response body, driven by the event loop: one call at a time, never blocking.
class EventStream {
 public:
  virtual ~EventStream() = default;
  // Appends the events ready now to `out`; true once the last one was appended.
  virtual bool take_events(std::string& out) = 0;
  // Once, at the end: `delivered` is false when the client went away, stopped reading or the server shut down.
  virtual void finish(bool delivered) = 0;
  virtual StreamWakeup& wakeup() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  std::string content_type;
  std::shared_ptr<EventStream> stream;  // set: the body is this stream, sent chunked
  bool close_connection = false;

  // Replaces a header of that name.
  void set_header(std::string_view name, std::string value);
  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

}  // namespace qinfer::server
