#include "server/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <regex>
#include <thread>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/handlers.h"
#include "server/http_session.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

enum class Access { kPublic, kApiKey };
// kWorker: the handler may block (engine, admission queue) or take long (tokenizing a large body).
enum class Runs { kOnLoop, kWorker };

using RouteHandler = std::function<void(ServerState&, const ModelRuntime*, const HttpRequest&, HttpResponse&)>;

struct Route {
  std::string method;
  std::regex pattern;
  Access access;
  bool needs_model;  // 503 while the model loads or the server drains
  Runs runs;
  RouteHandler handler;
};

// Adapts a handler that needs the loaded model.
template <typename Handler>
RouteHandler with_model(Handler handler) {
  return [handler](ServerState& state, const ModelRuntime* runtime, const HttpRequest& request,
                   HttpResponse& response) { handler(state, *runtime, request, response); };
}

RouteHandler generation(ApiKind kind) {
  return with_model([kind](ServerState& state, const ModelRuntime& runtime, const HttpRequest& request,
                           HttpResponse& response) { handle_generation(kind, state, runtime, request, response); });
}

// The route table: every endpoint the server answers.
std::vector<Route> routes() {
  // The chat page and its files (public: the page asks for the API key itself).
  const RouteHandler web_page = [](ServerState&, const ModelRuntime*, const HttpRequest& request,
                                   HttpResponse& response) { handle_web_asset(request, response); };
  return {
      {"GET", std::regex("/health"), Access::kPublic, false, Runs::kOnLoop,
       [](ServerState& state, const ModelRuntime* runtime, const HttpRequest&, HttpResponse& response) {
         handle_health(state, runtime, response);
       }},
      {"GET", std::regex("/metrics"), Access::kPublic, false, Runs::kOnLoop,
       [](ServerState& state, const ModelRuntime* runtime, const HttpRequest&, HttpResponse& response) {
         handle_metrics(state, runtime, response);
       }},
      {"GET", std::regex("/"), Access::kPublic, false, Runs::kOnLoop, web_page},
      {"GET", std::regex("/static/.+"), Access::kPublic, false, Runs::kOnLoop, web_page},
      {"GET", std::regex("/v1/models"), Access::kApiKey, true, Runs::kOnLoop, with_model(handle_models)},
      {"GET", std::regex("/v1/models/(.+)"), Access::kApiKey, true, Runs::kOnLoop, with_model(handle_models)},
      {"POST", std::regex("/v1/chat/completions"), Access::kApiKey, true, Runs::kWorker, generation(ApiKind::kChat)},
      {"POST", std::regex("/v1/completions"), Access::kApiKey, true, Runs::kWorker, generation(ApiKind::kCompletion)},
      {"POST", std::regex("/tokenize"), Access::kApiKey, true, Runs::kWorker, with_model(handle_tokenize)},
      {"POST", std::regex("/detokenize"), Access::kApiKey, true, Runs::kWorker, with_model(handle_detokenize)},
  };
}

void apply_cors(const ServerOptions& options, const HttpRequest& request, HttpResponse& response) {
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

// Every open connection holds a descriptor: the soft limit on open files (often 1 024) must leave room for every
// admitted and queued stream plus the model and log files. Raised up to the hard limit when needed.
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

void write_error(HttpResponse& response, const ApiError& error) {
  write_json(response, error.status(), error.to_json());
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

HttpLimits limits_from(const ServerOptions& options) {
  HttpLimits limits;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_header_count = options.max_header_count;
  limits.max_body_bytes = options.max_body_bytes;
  limits.header_timeout = milliseconds(options.header_timeout_seconds);
  limits.body_timeout = milliseconds(options.read_timeout_seconds);
  limits.keep_alive_timeout = milliseconds(options.keep_alive_timeout_seconds);
  limits.write_timeout = milliseconds(options.write_timeout_seconds);
  return limits;
}

// Aborted streams get this long after the grace period to send their last event before connections are closed.
constexpr std::chrono::milliseconds kAbortFlushTime{1000};

}  // namespace

class HttpServer::Core : public SessionHost {
 public:
  explicit Core(ServerState& state)
      : state_(state),
        limits_(limits_from(state.options())),
        io_threads_(state.options().http_threads > 0
                        ? state.options().http_threads
                        : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u))),
        loops_(make_loops(io_threads_)),
        acceptor_(loops_.front()->context),
        // Workers block in the admission queue or on a non-streamed request: one for every admitted and queued
        // request, plus headroom for tokenize calls and requests about to be refused.
        workers_(static_cast<size_t>(state.options().max_concurrent_requests + state.options().max_queue_len + 16)),
        routes_(routes()) {
    ensure_open_file_limit(
        static_cast<size_t>(state.options().max_concurrent_requests + state.options().max_queue_len + 64));
  }

  const HttpLimits& limits() const override { return limits_; }
  bool draining() const override { return state_.draining(); }
  void count_status(int status) override { state_.metrics().count_status(status); }

  HttpResponse refusal(const ReadRefusal& refusal) override {
    HttpResponse response;
    write_error(response, ApiError(refusal.status, "invalid_request_error", refusal.message));
    response.close_connection = true;
    return response;
  }

  void dispatch(std::shared_ptr<HttpRequest> request, std::function<void(HttpResponse)> respond) override {
    const Route* route = nullptr;
    HttpResponse response;
    apply_cors(state_.options(), *request, response);
    if (request->method == "OPTIONS") {  // CORS preflight for any path: no auth (browsers send none), no body
      response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      response.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      response.set_header("Access-Control-Max-Age", "600");
      response.status = 204;
      return respond(std::move(response));
    }
    for (const Route& candidate : routes_) {
      std::smatch match;
      if (candidate.method == request->method && std::regex_match(request->path, match, candidate.pattern)) {
        for (const auto& group : match) request->matches.push_back(group.str());
        route = &candidate;
        break;
      }
    }
    if (!route) {
      write_error(response,
                  ApiError(404, "invalid_request_error", "no route for " + request->method + " " + request->path,
                           std::nullopt, "unknown_route"));
      return respond(std::move(response));
    }
    auto run = [this, route, request, respond = std::move(respond), response = std::move(response)]() mutable {
      handle(*route, *request, response);
      spdlog::debug("{} {} -> {}", request->method, request->path, response.status);
      respond(std::move(response));
    };
    if (route->runs == Runs::kWorker)
      net::post(workers_, std::move(run));
    else
      run();
  }

  void handle(const Route& route, const HttpRequest& request, HttpResponse& response) {
    try {
      if (route.access == Access::kApiKey &&
          !bearer_authorized(state_.options().api_key, request.get_header_value("Authorization")))
        throw ApiError(401, "invalid_request_error", "Incorrect API key provided", std::nullopt, "invalid_api_key");
      const ModelRuntime* runtime = state_.runtime();
      if (route.needs_model && state_.draining()) {
        response.close_connection = true;
        throw ApiError(503, "service_unavailable", kShutdownRefusal);
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
  }

  int bind() {
    const ServerOptions& options = state_.options();
    const std::string where = options.host + ":" + std::to_string(options.port);
    boost::system::error_code error;
    const net::ip::address address = net::ip::make_address(options.host, error);
    if (error) throw Error(ErrorKind::kInvalidArgument, "--host " + options.host + " is not an IP address");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
    acceptor_.open(endpoint.protocol(), error);
    // SO_REUSEADDR only (restarts while old connections sit in TIME_WAIT); never SO_REUSEPORT, which would let a
    // second server share the port.
    if (!error) acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error) acceptor_.listen(net::socket_base::max_listen_connections, error);
    if (error)
      throw Error(ErrorKind::kUnavailable,
                  "cannot listen on " + where + ": " + error.message() +
                      (error == net::error::address_in_use ? " (another server uses the port?)" : ""));
    return acceptor_.local_endpoint().port();
  }

  void serve() {
    accept();
    std::vector<std::thread> others;
    for (size_t i = 1; i < loops_.size(); ++i) others.emplace_back([loop = loops_[i].get()] { loop->context.run(); });
    loops_.front()->context.run();
    for (std::thread& thread : others) thread.join();
    workers_.join();
  }

  void shutdown(const std::function<void()>& abort_in_flight) {
    const double grace = state_.options().shutdown_grace_seconds;
    spdlog::info("shutting down: refusing new requests, draining {} in flight for up to {:.0f} s",
                 state_.admission().running() + state_.admission().waiting(), grace);
    state_.start_draining();
    // Requests that have not started are answered now instead of holding the drain until their own deadline: those
    // waiting for a slot and those queued in the engine get 503 (a stream: its error event); running ones go on.
    state_.admission().close();
    if (const ModelRuntime* runtime = state_.runtime()) runtime->engine->refuse_unscheduled(kShutdownRefusal);
    net::post(loops_.front()->context, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    sessions_.drain_all();
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(grace);
    auto flush_until = deadline;
    if (!state_.admission().wait_idle(deadline)) {
      spdlog::warn("shutdown grace period over: aborting {} requests", state_.admission().running());
      abort_in_flight();
      flush_until = std::chrono::steady_clock::now() + kAbortFlushTime;
    }
    // Responses in flight are written; what is still open then (a client that does not read) is closed.
    while (sessions_.size() > 0 && std::chrono::steady_clock::now() < flush_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sessions_.close_all();
    for (auto& loop : loops_) loop->work.reset();
    const auto stop_at = std::chrono::steady_clock::now() + kAbortFlushTime;
    while (sessions_.size() > 0 && std::chrono::steady_clock::now() < stop_at)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto& loop : loops_) loop->context.stop();
  }

 private:
  // One event loop per IO thread, each an io_context run by that thread alone: a connection lives on one loop, so its
  // handlers need no strand, and what a loop posts to itself (write completions, the next read) stays on its private
  // queue instead of waking another thread. Connections are dealt to the loops in turn.
  struct Loop {
    net::io_context context{1};  // concurrency hint 1: one thread runs it (posts from other threads stay safe)
    net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(context);
  };
  static std::vector<std::unique_ptr<Loop>> make_loops(int count) {
    std::vector<std::unique_ptr<Loop>> loops;
    for (int i = 0; i < count; ++i) loops.push_back(std::make_unique<Loop>());
    return loops;
  }

  void accept() {
    net::io_context& loop = loops_[next_loop_++ % loops_.size()]->context;
    acceptor_.async_accept(loop, [this](const boost::system::error_code& error, tcp::socket socket) {
      if (error == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!error) {
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<HttpSession>(std::move(socket), *this, sessions_)->start();
        return accept();
      }
      // Out of descriptors or memory: retry shortly instead of spinning.
      spdlog::warn("accept failed: {}", error.message());
      auto timer = std::make_shared<net::steady_timer>(loops_.front()->context, std::chrono::milliseconds(100));
      timer->async_wait([this, timer](const boost::system::error_code&) {
        if (acceptor_.is_open()) accept();
      });
    });
  }

  ServerState& state_;
  const HttpLimits limits_;
  const int io_threads_;
  SessionRegistry sessions_;  // outlives the loops: sessions still queued in one unregister when it is destroyed
  std::vector<std::unique_ptr<Loop>> loops_;
  size_t next_loop_ = 0;  // the loop the next connection goes to (accept handlers run on the first loop only)
  tcp::acceptor acceptor_;
  net::thread_pool workers_;
  const std::vector<Route> routes_;
};

HttpServer::HttpServer(ServerState& state) : core_(std::make_unique<Core>(state)) {}
HttpServer::~HttpServer() = default;
int HttpServer::bind() { return core_->bind(); }
void HttpServer::serve() { core_->serve(); }
void HttpServer::shutdown(const std::function<void()>& abort_in_flight) { core_->shutdown(abort_in_flight); }

}  // namespace qinfer::server
