// The HTTP front: one route table, one dispatcher (CORS, auth, draining and model-loaded checks, error JSON, status
// metrics) in front of the handlers, and the server lifecycle: bind, serve, graceful shutdown.
#pragma once

#include <functional>
#include <memory>

#include "server/server_state.h"

namespace qinfer::server {

class DrainableHttpServer;

class HttpServer {
 public:
  explicit HttpServer(ServerState& state);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port from the options (port 0 picks a free port). Returns the bound port. Throws Error(kUnavailable)
  // when the address cannot be bound.
  int bind();
  // Serves on the calling thread until shutdown() has finished draining.
  void serve();
  // Graceful stop, callable from any thread once: new requests get 503 and the listening socket is closed, in-flight
  // requests get `--shutdown-grace-seconds` to finish, then `abort_in_flight` is called and serve() returns once the
  // remaining handlers are done.
  void shutdown(const std::function<void()>& abort_in_flight);

 private:
  void register_routes();

  ServerState& state_;
  std::unique_ptr<DrainableHttpServer> server_;
};

}  // namespace qinfer::server
