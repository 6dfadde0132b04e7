#include "server/http_server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/handlers.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::server {

// httplib's Server with one addition: closing the listening socket without flagging the server as stopped, so that
// streams in flight keep running (httplib ends chunked responses once stop() is called) while no new connection is
// accepted. The accept loop then ends and serve() returns when the last connection thread is done.
class DrainableHttpServer : public httplib::Server {
 public:
  void close_listener() {
    const socket_t listener = svr_sock_;
    if (listener != INVALID_SOCKET) ::shutdown(listener, SHUT_RDWR);
  }
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of connections (hundreds of clients opening streams at once)
  // overflows it while the accept thread waits for a core, and the kernel drops their SYNs, which the clients retry
  // only after 1 s, 3 s, ... Calling listen() again on the bound socket raises the backlog (capped by somaxconn).
  bool widen_backlog() {
    const socket_t listener = svr_sock_;
    return listener != INVALID_SOCKET && ::listen(listener, SOMAXCONN) == 0;
  }
};

namespace {

enum class Access { kPublic, kApiKey };

using RouteHandler =
    std::function<void(ServerState&, const ModelRuntime*, const httplib::Request&, httplib::Response&)>;

struct Route {
  const char* method;
  const char* pattern;
  Access access;
  bool needs_model;  // 503 while the model loads or the server drains
  RouteHandler handler;
};

// Adapts a handler that needs the loaded model.
template <typename Handler>
RouteHandler with_model(Handler handler) {
  return [handler](ServerState& state, const ModelRuntime* runtime, const httplib::Request& request,
                   httplib::Response& response) { handler(state, *runtime, request, response); };
}

// The route table: every endpoint the server answers.
std::vector<Route> routes() {
  // The chat page and its files (public: the page asks for the API key itself).
  const RouteHandler web_page = [](ServerState&, const ModelRuntime*, const httplib::Request& request,
                                   httplib::Response& response) { handle_web_asset(request, response); };
  return {
      {"GET", "/health", Access::kPublic, false,
       [](ServerState& state, const ModelRuntime* runtime, const httplib::Request&, httplib::Response& response) {
         handle_health(state, runtime, response);
       }},
      {"GET", "/metrics", Access::kPublic, false,
       [](ServerState& state, const ModelRuntime* runtime, const httplib::Request&, httplib::Response& response) {
         handle_metrics(state, runtime, response);
       }},
      {"GET", "/", Access::kPublic, false, web_page},
      {"GET", R"(/static/.+)", Access::kPublic, false, web_page},
      {"GET", "/v1/models", Access::kApiKey, true, with_model(handle_models)},
      {"GET", R"(/v1/models/(.+))", Access::kApiKey, true, with_model(handle_models)},
      {"POST", "/v1/chat/completions", Access::kApiKey, true,
       with_model(
           [](ServerState& state, const ModelRuntime& runtime, const httplib::Request& request,
              httplib::Response& response) { handle_generation(ApiKind::kChat, state, runtime, request, response); })},
      {"POST", "/v1/completions", Access::kApiKey, true,
       with_model([](ServerState& state, const ModelRuntime& runtime, const httplib::Request& request,
                     httplib::Response& response) {
         handle_generation(ApiKind::kCompletion, state, runtime, request, response);
       })},
      {"POST", "/tokenize", Access::kApiKey, true, with_model(handle_tokenize)},
      {"POST", "/detokenize", Access::kApiKey, true, with_model(handle_detokenize)},
  };
}

void apply_cors(const ServerOptions& options, const httplib::Request& request, httplib::Response& response) {
  if (options.cors_origins.empty() || !request.has_header("Origin")) return;
  const std::string origin = request.get_header_value("Origin");
  const auto& allowed = options.cors_origins;
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) {
    response.set_header("Access-Control-Allow-Origin", "*");
  } else if (std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) {
    response.set_header("Access-Control-Allow-Origin", origin);
    response.set_header("Vary", "Origin");
  }
}

// Every pool thread may hold a connection: the soft limit on open files (often 1 024) must leave room for all of them
// plus the model and log files. Raised up to the hard limit when needed; a warning says when even that is short.
void ensure_open_file_limit(size_t connections) {
  const rlim_t needed = static_cast<rlim_t>(connections) + 256;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  const rlim_t raised = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  limit.rlim_cur = raised;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) spdlog::info("raised the open-file limit to {}", raised);
  if (raised < needed)
    spdlog::warn("the open-file limit ({}) is below {} connections + 256; raise `ulimit -Hn`", raised, connections);
}

void write_error(httplib::Response& response, const ApiError& error) {
  write_json(response, error.status(), error.to_json());
}

}  // namespace

HttpServer::HttpServer(ServerState& state) : state_(state), server_(std::make_unique<DrainableHttpServer>()) {
  const ServerOptions& options = state_.options();
  const size_t threads = options.http_threads > 0
                             ? static_cast<size_t>(options.http_threads)
                             : static_cast<size_t>(options.max_concurrent_requests + options.max_queue_len + 16);
  // One thread per open connection (httplib's model): sized for every admitted and queued stream plus headroom for
  // /health, /metrics and requests that are about to be refused.
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  ensure_open_file_limit(threads);
  server_->set_payload_max_length(options.max_body_bytes);
  server_->set_read_timeout(options.read_timeout_seconds, 0);
  server_->set_write_timeout(options.write_timeout_seconds, 0);
  server_->set_keep_alive_timeout(options.keep_alive_timeout_seconds);
  server_->set_tcp_nodelay(true);
  server_->set_error_handler([this](const httplib::Request& request, httplib::Response& response) {
    apply_cors(state_.options(), request, response);
    if (!response.body.empty()) return;
    if (response.status == 404)
      write_error(response,
                  ApiError(404, "invalid_request_error", "no route for " + request.method + " " + request.path,
                           std::nullopt, "unknown_route"));
    else if (response.status == 413)
      write_error(response, ApiError(413, "invalid_request_error",
                                     "the request body exceeds --max-body-bytes (" +
                                         std::to_string(state_.options().max_body_bytes) + " bytes)"));
    else
      write_error(response, ApiError(response.status, "invalid_request_error",
                                     "malformed or incomplete HTTP request (or a client slower than --read-timeout)"));
  });
  server_->set_logger([this](const httplib::Request& request, const httplib::Response& response) {
    state_.metrics().count_status(response.status);
    spdlog::debug("{} {} -> {}", request.method, request.path, response.status);
  });
  register_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::register_routes() {
  for (Route& route : routes()) {
    auto dispatch = [this, route](const httplib::Request& request, httplib::Response& response) {
      apply_cors(state_.options(), request, response);
      try {
        if (route.access == Access::kApiKey &&
            !bearer_authorized(state_.options().api_key, request.get_header_value("Authorization")))
          throw ApiError(401, "invalid_request_error", "Incorrect API key provided", std::nullopt, "invalid_api_key");
        const ModelRuntime* runtime = state_.runtime();
        if (route.needs_model && state_.draining()) {
          response.set_header("Connection", "close");
          throw ApiError(503, "service_unavailable", "the server is shutting down");
        }
        if (route.needs_model && !runtime)
          throw ApiError(503, "service_unavailable", "the model is still loading; retry when /health answers 200");
        route.handler(state_, runtime, request, response);
      } catch (const ApiError& error) {
        write_error(response, error);
      } catch (const Error& error) {
        write_error(response, api_error_from(error));
      } catch (const std::exception& error) {
        spdlog::error("{} {}: {}", request.method, request.path, error.what());
        write_error(response, ApiError(500, "internal_error", std::string("internal error: ") + error.what()));
      }
    };
    if (std::string_view(route.method) == "GET")
      server_->Get(route.pattern, dispatch);
    else
      server_->Post(route.pattern, dispatch);
  }
  // CORS preflight for any path: no auth (browsers send none), no body.
  server_->Options(".*", [this](const httplib::Request& request, httplib::Response& response) {
    apply_cors(state_.options(), request, response);
    response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    response.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    response.set_header("Access-Control-Max-Age", "600");
    response.status = 204;
  });
}

int HttpServer::bind() {
  const ServerOptions& options = state_.options();
  int port = options.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options.host);
  } else if (!server_->bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port <= 0)
    throw Error(ErrorKind::kUnavailable, "cannot listen on " + options.host + ":" + std::to_string(options.port) +
                                             " (address in use or not available)");
  if (!server_->widen_backlog()) spdlog::warn("could not raise the listen backlog; bursts of connections may stall");
  return port;
}

void HttpServer::serve() { server_->listen_after_bind(); }

void HttpServer::shutdown(const std::function<void()>& abort_in_flight) {
  const double grace = state_.options().shutdown_grace_seconds;
  spdlog::info("shutting down: refusing new requests, draining {} in flight for up to {:.0f} s",
               state_.admission().running() + state_.admission().waiting(), grace);
  state_.start_draining();
  server_->close_listener();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(grace));
  if (!state_.admission().wait_idle(deadline)) {
    spdlog::warn("shutdown grace period over: aborting {} requests", state_.admission().running());
    abort_in_flight();
  }
}

}  // namespace qinfer::server
