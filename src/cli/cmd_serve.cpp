// qinfer serve: the OpenAI-compatible HTTP server. Binds first (so /health answers 503 while loading), loads the
// model, warms the engine up, then serves until SIGTERM/SIGINT, which drains in-flight requests and exits 0.
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "backend/factory.h"
#include "cli/commands.h"
#include "cli/draft_model.h"
#include "cli/engine_flags.h"
#include "cli/model_loading.h"
#include "cli/serve_help.h"
#include "cli/startup_summary.h"
#include "cli/vllm_serve_flags.h"
#include "engine/tokenizer_text_decoder.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  BackendOptions backend;
  server::ServerOptions server;
  std::string served_model_name;
  EngineFlags engine;
  VllmServeFlags vllm;
  bool allow_special_tokens_in_content = false;
};

std::string served_model_name(const ServeFlags& f) {
  return !f.served_model_name.empty() ? f.served_model_name : !f.model.model.empty() ? f.model.model : "qinfer-demo";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Logs where the tokenizer and chat template come from: users of the demo model should know it is the test asset.
std::filesystem::path tokenizer_dir(const ModelFlags& flags) {
  std::optional<std::filesystem::path> dir = find_tokenizer_dir(flags);
  if (!dir)
    throw Error(ErrorKind::kNotFound,
                "no tokenizer.json found: pass --tokenizer DIR (the demo model uses .assets/qwen3-tokenizer from "
                "tools/fetch-test-assets.sh)");
  spdlog::info("tokenizer and chat template from {}", dir->string());
  return *dir;
}

// Everything that exists once the model is loaded; destroyed after the HTTP server has stopped.
struct LoadedRuntime {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Backend> draft;  // --speculative-config's draft model
  std::unique_ptr<server::PromptBuilder> prompts;
  std::unique_ptr<grammar::GrammarCompiler> grammars;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::EngineWatchdog> watchdog;
  server::ModelRuntime runtime;

  ~LoadedRuntime() {
    watchdog.reset();
    if (engine) engine->stop();
  }
};

// `start` is when serving began; the ready line says where the time since went.
std::unique_ptr<LoadedRuntime> load_runtime(const ServeFlags& f, std::chrono::steady_clock::time_point start) {
  auto loaded = std::make_unique<LoadedRuntime>();
  std::vector<std::pair<std::string, double>> phases;
  auto phase_start = std::chrono::steady_clock::now();
  auto end_phase = [&](const char* name) {
    phases.emplace_back(name, seconds_since(phase_start));
    phase_start = std::chrono::steady_clock::now();
  };
  std::filesystem::path tokenizer_path = tokenizer_dir(f.model);
  Tokenizer tokenizer = Tokenizer::from_model_dir(tokenizer_path);
  ChatTemplate chat_template = load_chat_template(tokenizer_path, f.vllm.chat_template);
  end_phase("tokenizer");
  auto model = load_model_from_flags(f.model);
  end_phase("weights");
  EngineOptions engine_options = engine_options_from_flags(f.backend, f.engine);
  SpeculativeBackends backends = create_backends(model, f.model, f.backend, engine_options.speculation);
  loaded->backend = std::move(backends.target);
  loaded->draft = std::move(backends.draft);
  end_phase("backend");
  apply_vllm_engine_flags(f.vllm, engine_options);
  engine_options.make_text_decoder = make_tokenizer_text_decoder(tokenizer);
  loaded->engine = std::make_unique<Engine>(*loaded->backend, engine_options, loaded->draft.get());
  spdlog::info("{}", engine_summary(*loaded->backend, f.backend, engine_options));
  spdlog::info("{}", memory_summary(loaded->backend->memory_plan(), loaded->engine->max_model_len()));
  loaded->engine->start();

  // Warm-up: one short generation so the first client does not pay for first-call allocations.
  GenerationRequest warmup;
  warmup.prompt = tokenizer.encode("Hello", false);
  warmup.max_tokens = 2;
  warmup.sampling.temperature = 0.0f;
  RequestHandle handle = loaded->engine->submit(std::move(warmup));
  std::vector<StreamDelta> ignored;
  while (handle.stream->wait_drain(ignored)) ignored.clear();
  end_phase("warm-up");

  loaded->prompts =
      std::make_unique<server::PromptBuilder>(tokenizer, std::move(chat_template), f.allow_special_tokens_in_content);
  // Constraints allow the engine's stop ids where they are complete.
  loaded->grammars = std::make_unique<grammar::GrammarCompiler>(grammar::TokenVocabulary::from_tokenizer(
      tokenizer, model->config.vocab_size, engine_options.eos_token_ids.value_or(model->config.eos_token_ids)));
  loaded->grammars->warm_up();
  loaded->watchdog = std::make_unique<server::EngineWatchdog>(*loaded->engine, f.server.health_stall_seconds);
  server::ModelRuntime& runtime = loaded->runtime;
  runtime.engine = loaded->engine.get();
  runtime.prompts = loaded->prompts.get();
  runtime.grammars = loaded->grammars.get();
  runtime.watchdog = loaded->watchdog.get();
  runtime.served_model_name = served_model_name(f);
  runtime.max_model_len = loaded->engine->max_model_len();
  runtime.vocab_size = model->config.vocab_size;
  runtime.defaults = generation_defaults(model->config, f.vllm.generation_config);
  runtime.created = server::unix_time_now();
  spdlog::info("{}", startup_time_summary(seconds_since(start), phases));
  return loaded;
}

void run_serve(const ServeFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  // Signals are taken by one thread with sigwait; every other thread (created below) inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);   // ignored (logged): qinfer has no configuration to reload
  sigaddset(&signals, SIGUSR1);  // internal: wakes the signal thread when serving ends for another reason
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away must not kill the server

  server::ServerOptions server_options = f.server;
  server_options.metrics_model_name = served_model_name(f);
  server::ServerState state(server_options);
  server::HttpServer http(state);
  const int port = http.bind();
  spdlog::info("listening on http://{}:{} (/health answers 503 until the model is ready)", f.server.host, port);
  std::thread serving([&] { http.serve(); });

  std::unique_ptr<LoadedRuntime> loaded;
  auto abort_in_flight = [&] {
    if (loaded)
      for (uint64_t id : state.in_flight().ids()) loaded->engine->abort(id);
  };
  std::thread signal_thread([&] {
    int received = 0;
    for (sigwait(&signals, &received); received == SIGHUP; sigwait(&signals, &received))
      spdlog::info("received SIGHUP: ignored (there is no configuration to reload; SIGTERM stops the server)");
    if (received == SIGUSR1) return;
    spdlog::info("received {}", received == SIGTERM ? "SIGTERM" : "SIGINT");
    http.shutdown(abort_in_flight);
  });

  std::exception_ptr load_error;
  try {
    loaded = load_runtime(f, start);
    state.set_runtime(&loaded->runtime);
    spdlog::info("ready: serving '{}' on http://{}:{}", loaded->runtime.served_model_name, f.server.host, port);
  } catch (...) {
    load_error = std::current_exception();
    // Reported first, before the shutdown below logs anything.
    try {
      std::rethrow_exception(load_error);
    } catch (const std::exception& e) {
      spdlog::error("loading failed: {}", e.what());
    } catch (...) {
      spdlog::error("loading failed");
    }
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();
    http.shutdown([] {});
  }
  serving.join();
  if (signal_thread.joinable()) signal_thread.join();
  state.set_runtime(nullptr);
  loaded.reset();
  if (load_error) std::rethrow_exception(load_error);
  spdlog::info("server stopped");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  add_model_flags(*cmd, f->model);
  add_backend_flags(*cmd, f->backend);
  server::ServerOptions& s = f->server;
  cmd->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->served_model_name, "Model name in the API (default: --model)");
  cmd->add_option("--api-key", s.api_key, "Require 'Authorization: Bearer KEY' (except /health and /metrics)")
      ->envname("QINFER_API_KEY");
  add_engine_flags(*cmd, f->backend, f->engine);
  cmd->add_option("--max-concurrent-requests", s.max_concurrent_requests,
                  "Generation requests handed to the engine at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-queue-len", s.max_queue_len, "Requests waiting for a slot; beyond this: 429")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--request-timeout", s.request_timeout_seconds, "Per-request deadline in seconds, queueing included")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--shutdown-grace-seconds", s.shutdown_grace_seconds,
                  "On SIGTERM: seconds in-flight requests get to finish before they are aborted")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--response-cache-size", s.response_cache_size,
                  "Cache this many deterministic (greedy or seeded) non-streamed responses; 0: off")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "Largest request body accepted (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", s.max_header_bytes,
                  "Largest request line + headers accepted (431 beyond; 414 for the request line)")
      ->check(CLI::Range(size_t{1024}, size_t{16} << 20))
      ->capture_default_str();
  cmd->add_option("--max-header-count", s.max_header_count, "Most header lines in a request (431 beyond)")
      ->check(CLI::Range(size_t{1}, size_t{10000}))
      ->capture_default_str();
  cmd->add_option("--header-timeout", s.header_timeout_seconds,
                  "Seconds a request's headers may take in all, from their first byte (408 beyond)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--read-timeout", s.read_timeout_seconds,
                  "Seconds a request's body may take in all, after its headers (408 beyond)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--write-timeout", s.write_timeout_seconds,
                  "Seconds a write may wait on a client that stopped reading")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", s.keep_alive_timeout_seconds, "Seconds an idle keep-alive connection stays")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--allowed-origins", s.cors_origins, "CORS: origins allowed to call the API ('*' for any)");
  cmd->add_option("--reasoning-parser", s.reasoning_parser,
                  "qwen3: <think>...</think> in chat output goes to message.reasoning_content / "
                  "delta.reasoning_content (vLLM's name)")
      ->check(CLI::IsMember({"qwen3"}));
  cmd->add_option("--http-threads", s.http_threads,
                  "HTTP event-loop (IO) threads; connections cost no thread (0: the cores, at most 4)")
      ->capture_default_str();
  cmd->add_flag("--allow-special-tokens-in-content", f->allow_special_tokens_in_content,
                "Match special tokens inside message content as HF does (lets clients forge chat turns)");
  add_vllm_serve_flags(*cmd, f->vllm, f->server);
  group_serve_flags(*cmd);
  cmd->callback([f] {
    apply_vllm_serve_flags(f->vllm, f->model, f->server);
    run_serve(*f);
  });
}

}  // namespace qinfer::cli
