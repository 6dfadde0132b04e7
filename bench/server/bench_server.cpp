#include "bench/server/bench_server.h"

#include <dirent.h>

#include <fstream>
#include <set>
#include <string>

#include "engine/tokenizer_text_decoder.h"
#include "server/openai_response.h"
#include "util/error.h"

namespace qinfer::bench {
namespace {

std::set<pid_t> thread_ids() {
  std::set<pid_t> ids;
  for (const auto& [tid, ns] : thread_cpu_ns()) ids.insert(tid);
  return ids;
}

}  // namespace

std::map<pid_t, uint64_t> thread_cpu_ns() {
  std::map<pid_t, uint64_t> out;
  DIR* tasks = opendir("/proc/self/task");
  QINFER_CHECK(tasks != nullptr, "cannot list /proc/self/task");
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream schedstat(std::string("/proc/self/task/") + entry->d_name + "/schedstat");
    uint64_t run_ns = 0;
    if (schedstat >> run_ns) out[static_cast<pid_t>(std::stol(entry->d_name))] = run_ns;
  }
  closedir(tasks);
  return out;
}

ProcessMemory process_memory() {
  std::ifstream status("/proc/self/status");
  ProcessMemory memory;
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") status >> memory.resident_kib;
    if (key == "Threads:") status >> memory.threads;
  }
  return memory;
}

BenchServer::BenchServer(Backend& backend, EngineOptions engine_options, server::ServerOptions server_options,
                         const std::filesystem::path& tokenizer_dir) {
  Tokenizer tokenizer = Tokenizer::from_model_dir(tokenizer_dir);
  ChatTemplate chat_template = ChatTemplate::from_model_dir(tokenizer_dir);
  engine_options.make_text_decoder = make_tokenizer_text_decoder(tokenizer);
  prompts_ = std::make_unique<server::PromptBuilder>(tokenizer, std::move(chat_template), false);
  engine_ = std::make_unique<Engine>(backend, std::move(engine_options));
  const std::set<pid_t> before = thread_ids();
  engine_->start();
  for (pid_t tid : thread_ids())
    if (!before.count(tid)) engine_thread_ = tid;
  QINFER_CHECK(engine_thread_ != 0, "could not identify the engine thread");

  runtime_.engine = engine_.get();
  runtime_.prompts = prompts_.get();
  runtime_.served_model_name = "bench";
  runtime_.max_model_len = engine_->max_model_len();
  runtime_.vocab_size = backend.config().vocab_size;
  runtime_.created = server::unix_time_now();
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  state_ = std::make_unique<server::ServerState>(std::move(server_options));
  state_->set_runtime(&runtime_);
  http_ = std::make_unique<server::HttpServer>(*state_);
  port_ = http_->bind();
  serving_ = std::thread([this] { http_->serve(); });
}

BenchServer::~BenchServer() {
  http_->shutdown([] {});
  serving_.join();
  engine_->stop();
}

}  // namespace qinfer::bench
