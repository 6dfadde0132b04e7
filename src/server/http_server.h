// The HTTP front: one route table, one dispatcher (CORS, auth, draining and model-loaded checks, error JSON, status
// metrics) in front of the handlers, and the server lifecycle: bind, serve, graceful shutdown. Connections live on an
// event loop (Boost.Beast/Asio, http_session.h) per IO thread; handlers that wait for the engine or tokenize run
// on a separate worker pool, so that neither slow clients nor slow requests hold the threads that answer /health.
#pragma once

#include <functional>
#include <memory>

#include "server/server_state.h"

namespace qinfer::server {

class HttpServer {
 public:
  explicit HttpServer(ServerState& state);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port from the options (port 0 picks a free port; no SO_REUSEPORT, so a port in use fails). Returns the
  // bound port. Throws Error(kUnavailable) naming the address and port when it cannot be bound.
  int bind();
  // Serves on the calling thread (plus the other IO threads it starts) until shutdown() has finished.
  void serve();
  // Graceful stop, callable from any thread once: new requests get 503, the listening socket and idle or half-read
  // connections are closed, in-flight requests get `--shutdown-grace-seconds` to finish, then `abort_in_flight` is
  // called, aborted streams get a moment to send their last event, and every connection left is closed.
  void shutdown(const std::function<void()>& abort_in_flight);

 private:
  class Core;
  std::unique_ptr<Core> core_;
};

}  // namespace qinfer::server
