// An in-process `qinfer serve` for the server benchmarks: the real HttpServer, ServerState and PromptBuilder over
// any Backend, on a free loopback port, plus per-thread CPU accounting (/proc/self/task/*/schedstat) so that the
// engine thread's time can be told apart from the HTTP threads'.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "engine/engine.h"
#include "server/http_server.h"
#include "server/prompt_builder.h"
#include "server/server_state.h"

namespace qinfer::bench {

// Nanoseconds each thread of this process has run, by thread id.
std::map<pid_t, uint64_t> thread_cpu_ns();
// VmRSS and Threads of this process (KiB, count).
struct ProcessMemory {
  long resident_kib = 0;
  long threads = 0;
};
ProcessMemory process_memory();

class BenchServer {
 public:
  // Starts the engine on `backend` and serves on 127.0.0.1:<free port>. `tokenizer_dir` holds tokenizer.json and the
  // chat template.
  BenchServer(Backend& backend, EngineOptions engine_options, server::ServerOptions server_options,
              const std::filesystem::path& tokenizer_dir);
  ~BenchServer();

  int port() const { return port_; }
  Engine& engine() { return *engine_; }
  const server::PromptBuilder& prompts() const { return *prompts_; }
  server::ServerState& state() { return *state_; }
  pid_t engine_thread() const { return engine_thread_; }

 private:
  std::unique_ptr<server::PromptBuilder> prompts_;
  std::unique_ptr<Engine> engine_;
  pid_t engine_thread_ = 0;
  server::ModelRuntime runtime_;
  std::unique_ptr<server::ServerState> state_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread serving_;
  int port_ = 0;
};

}  // namespace qinfer::bench
