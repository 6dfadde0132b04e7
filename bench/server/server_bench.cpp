// Server speed (docs/PERFORMANCE.md, "Host side"). Runs the real HTTP server in-process.
//
//   server_bench overhead --streams 64 --tokens 256 --step-ms 10
//     CPU time of the server's HTTP threads per streamed token. The engine runs on the fake backend (tests/engine:
//     tokens cost nothing), each step sleeping --step-ms like a GPU step, so every stream gets one token per step as
//     in real serving. The client is a child process (one epoll thread), so its CPU is not counted. Reports HTTP-thread
//     and engine-thread µs per token, the server's memory and whether every stream completed (--streams 1000 is the
//     "1 000 open SSE connections" run).
//   server_bench ttft [--model DIR] --runs 40
//     At idle, on a real model (the tiny test model on the CPU backend) or, without --model, on the paced fake model
//     (whose steady step time makes the gap measurable on a busy machine): the engine's TTFT (submit → first delta
//     with text, prompt already tokenized) against the HTTP TTFT (request written → first SSE chunk with content).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/factory.h"
#include "bench/server/bench_server.h"
#include "cli/model_loading.h"
#include "testing/fake_backend.h"
#include "util/error.h"

namespace qinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  QINFER_CHECK(fd >= 0, "socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  QINFER_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "connect() failed");
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    QINFER_CHECK(n > 0, "send() failed");
    sent += static_cast<size_t>(n);
  }
}

std::string chat_request(const std::string& content, int max_tokens) {
  const nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", content}}}},
                               {"max_tokens", max_tokens},
                               {"ignore_eos", true},
                               {"temperature", 0},
                               {"stream", true}};
  const std::string text = body.dump();
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text;
}

// ---- overhead: many streams from a child process ----

struct StreamTotals {
  long completed = 0;  // streams that ended with data: [DONE]
  long events = 0;     // SSE data events received
  long failed = 0;     // connections that closed without [DONE]
};

// What the client reports through its pipe, in order: the events received when every stream is streaming (has its
// role chunk and two tokens), the events received when the first stream ends, then StreamTotals. Between the first
// two, the server does only steady-state streaming: no connection, request parsing or templating.
using EventCount = long;

// The child's client: opens every connection and sends every request first (so all streams are open at once), then
// reads them all with epoll until each is closed.
StreamTotals run_stream_client(int port, int streams, int tokens, int report_fd) {
  struct Connection {
    int fd = -1;
    std::string tail;  // last bytes of the previous read: markers split across reads
    long events = 0;
    bool done = false;
  };
  int streaming = 0;  // connections with at least three events
  bool steady_reported = false;
  bool first_end_reported = false;
  auto report = [&](EventCount events) {
    QINFER_CHECK(write(report_fd, &events, sizeof events) == sizeof events, "client: cannot report");
  };
  std::vector<Connection> connections(static_cast<size_t>(streams));
  const int epoll = epoll_create1(0);
  for (int i = 0; i < streams; ++i) {
    Connection& connection = connections[static_cast<size_t>(i)];
    connection.fd = connect_loopback(port);
    send_all(connection.fd, chat_request("Stream " + std::to_string(i) + ": tell me a story", tokens));
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(epoll, EPOLL_CTL_ADD, connection.fd, &event);
  }
  StreamTotals totals;
  int open = streams;
  std::vector<epoll_event> ready(256);
  std::vector<char> buffer(1 << 16);
  while (open > 0) {
    const int n = epoll_wait(epoll, ready.data(), static_cast<int>(ready.size()), 120000);
    QINFER_CHECK(n > 0, "client: no progress for 120 s");
    for (int k = 0; k < n; ++k) {
      Connection& connection = connections[ready[static_cast<size_t>(k)].data.u32];
      const ssize_t got = read(connection.fd, buffer.data(), buffer.size());
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(connection.fd);
        --open;
        if (connection.done)
          ++totals.completed;
        else
          ++totals.failed;
        continue;
      }
      std::string text = connection.tail + std::string(buffer.data(), static_cast<size_t>(got));
      // A marker that ends inside the old tail was counted by the previous read.
      for (size_t pos = text.find("data: "); pos != std::string::npos; pos = text.find("data: ", pos + 1))
        if (pos + 6 > connection.tail.size()) {
          ++totals.events;
          if (++connection.events == 3) ++streaming;
        }
      if (text.find("data: [DONE]") != std::string::npos) connection.done = true;
      connection.tail = text.substr(text.size() > 16 ? text.size() - 16 : 0);
      if (!steady_reported && (streaming == streams || connection.done)) {
        report(totals.events);
        steady_reported = true;
      }
      if (!first_end_reported && connection.done) {
        report(totals.events);
        first_end_reported = true;
      }
    }
  }
  close(epoll);
  return totals;
}

struct OverheadOptions {
  int streams = 64;
  int tokens = 256;
  double step_ms = 10;
  std::string tokenizer;
};

// The fake model with a step time: FakeBackend's tokens, then a sleep, as if a GPU step took that long.
class PacedBackend final : public Backend {
 public:
  PacedBackend(testing::FakeModelSpec spec, double step_ms) : fake_(std::move(spec)), step_ms_(step_ms) {}
  std::string name() const override { return "fake (paced)"; }
  const ModelConfig& config() const override { return fake_.config(); }
  KvCacheShape kv_cache() const override { return fake_.kv_cache(); }
  int max_model_len() const override { return fake_.max_model_len(); }
  std::vector<SampleResult> step(const Batch& batch) override {
    std::vector<SampleResult> results = fake_.step(batch);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms_));
    return results;
  }
  std::vector<float> forward_logits(const Batch& batch) override { return fake_.forward_logits(batch); }

 private:
  testing::FakeBackend fake_;
  double step_ms_;
};

struct CpuSplit {
  uint64_t http_ns = 0;    // every thread but the engine's and the main thread (which only samples memory)
  uint64_t engine_ns = 0;  // the engine thread
};

CpuSplit split_cpu(const std::map<pid_t, uint64_t>& before, const std::map<pid_t, uint64_t>& after,
                   pid_t engine_thread) {
  CpuSplit split;
  for (const auto& [tid, ns] : after) {
    const uint64_t used = ns - (before.count(tid) ? before.at(tid) : 0);
    if (tid == engine_thread)
      split.engine_ns += used;
    else if (tid != getpid())
      split.http_ns += used;
  }
  return split;
}

// A fake model big enough for `streams` chat requests of `tokens` tokens each.
testing::FakeModelSpec fake_spec(int streams, int tokens) {
  testing::FakeModelSpec spec;
  spec.vocab_size = 151936;  // the real tokenizer's ids: chat prompts are valid, sampled tokens decode to real text
  spec.block_size = 16;
  spec.max_model_len = tokens + 128;
  spec.num_blocks = streams * ((spec.max_model_len + 15) / 16) + 16;
  spec.eos_token_ids = {151645};
  return spec;
}

int run_overhead(const OverheadOptions& options) {
  // Both processes hold one socket per stream.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  // The client is forked before any thread exists.
  int port_pipe[2];
  int result_pipe[2];
  QINFER_CHECK(pipe(port_pipe) == 0 && pipe(result_pipe) == 0, "pipe() failed");
  const pid_t child = fork();
  QINFER_CHECK(child >= 0, "fork() failed");
  if (child == 0) {
    int port = 0;
    QINFER_CHECK(read(port_pipe[0], &port, sizeof port) == sizeof port, "client: no port");
    const StreamTotals totals = run_stream_client(port, options.streams, options.tokens, result_pipe[1]);
    QINFER_CHECK(write(result_pipe[1], &totals, sizeof totals) == sizeof totals, "client: cannot report");
    _exit(0);
  }

  PacedBackend backend(fake_spec(options.streams, options.tokens), options.step_ms);
  EngineOptions engine_options;
  engine_options.max_num_seqs = std::max(options.streams, 1);
  engine_options.max_num_batched_tokens = std::max(8192, options.streams);
  engine_options.enable_prefix_caching = false;
  server::ServerOptions server_options;
  server_options.max_concurrent_requests = options.streams;
  server_options.max_queue_len = 0;
  BenchServer server(backend, engine_options, server_options, options.tokenizer);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the HTTP thread pool is up
  const ProcessMemory idle = process_memory();

  const std::map<pid_t, uint64_t> cpu_before = thread_cpu_ns();
  const auto start = Clock::now();
  const int port = server.port();
  QINFER_CHECK(write(port_pipe[1], &port, sizeof port) == sizeof port, "cannot start the client");
  ProcessMemory peak = idle;
  auto read_report = [&](void* into, size_t size) {
    pollfd result{result_pipe[0], POLLIN, 0};
    while (poll(&result, 1, 100) == 0) {
      const ProcessMemory now = process_memory();
      peak.resident_kib = std::max(peak.resident_kib, now.resident_kib);
      peak.threads = std::max(peak.threads, now.threads);
    }
    QINFER_CHECK(read(result_pipe[0], into, size) == static_cast<ssize_t>(size), "the client failed");
  };
  EventCount steady_events = 0;
  EventCount first_end_events = 0;
  read_report(&steady_events, sizeof steady_events);
  const std::map<pid_t, uint64_t> cpu_steady = thread_cpu_ns();
  read_report(&first_end_events, sizeof first_end_events);
  const std::map<pid_t, uint64_t> cpu_first_end = thread_cpu_ns();
  StreamTotals totals;
  read_report(&totals, sizeof totals);
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  const std::map<pid_t, uint64_t> cpu_after = thread_cpu_ns();
  waitpid(child, nullptr, 0);

  const CpuSplit run = split_cpu(cpu_before, cpu_after, server.engine_thread());
  const CpuSplit steady = split_cpu(cpu_steady, cpu_first_end, server.engine_thread());
  const double steady_tokens = static_cast<double>(first_end_events - steady_events);
  const double tokens = static_cast<double>(options.streams) * options.tokens;
  std::printf(
      "streams %d x %d tokens, step %.1f ms: completed %ld, failed %ld, SSE events %ld, wall %.2f s\n"
      "  HTTP threads, steady streaming: %.2f us CPU per streamed token (%.0f tokens while every stream was open)\n"
      "  HTTP threads, whole run: %.2f us CPU per token (connections, parsing, templating, streaming; %.1f ms)\n"
      "  engine thread: %.2f us CPU per token, steady (scheduling, detokenizing, stream push; fake model)\n"
      "  memory: idle %ld MiB with %ld threads; peak %ld MiB with %ld threads -> %.1f KiB per open stream\n",
      options.streams, options.tokens, options.step_ms, totals.completed, totals.failed, totals.events, wall_s,
      steady_tokens > 0 ? static_cast<double>(steady.http_ns) / 1e3 / steady_tokens : 0.0, steady_tokens,
      static_cast<double>(run.http_ns) / 1e3 / tokens, static_cast<double>(run.http_ns) / 1e6,
      steady_tokens > 0 ? static_cast<double>(steady.engine_ns) / 1e3 / steady_tokens : 0.0, idle.resident_kib / 1024,
      idle.threads, peak.resident_kib / 1024, peak.threads,
      static_cast<double>(peak.resident_kib - idle.resident_kib) / options.streams);
  return totals.completed == options.streams ? 0 : 1;
}

// ---- ttft: engine vs HTTP at idle ----

struct TtftOptions {
  std::string model;  // empty: the paced fake backend
  double fake_step_ms = 5;
  std::string tokenizer;
  int runs = 40;
  int threads = 1;
};

// Request written → first SSE chunk whose delta has content.
double http_ttft_us(int port, const std::string& request) {
  const int fd = connect_loopback(port);
  const auto start = Clock::now();
  send_all(fd, request);
  std::string received;
  char buffer[4096];
  size_t scanned = 0;
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    QINFER_CHECK(got > 0, "connection closed before any content");
    received.append(buffer, static_cast<size_t>(got));
    for (size_t pos; (pos = received.find("data: {", scanned)) != std::string::npos;) {
      const size_t end = received.find('\n', pos);
      if (end == std::string::npos) break;
      const nlohmann::json chunk = nlohmann::json::parse(received.substr(pos + 6, end - pos - 6));
      scanned = end;
      const auto& choices = chunk["choices"];
      if (!choices.empty() && choices[0]["delta"].contains("content") &&
          !choices[0]["delta"]["content"].get<std::string>().empty()) {
        const double us = micros(Clock::now() - start);
        close(fd);
        return us;
      }
    }
  }
}

// Submit → first delta with text, prompt already tokenized.
double engine_ttft_us(Engine& engine, const std::vector<int32_t>& prompt, int max_tokens) {
  GenerationRequest request;
  request.prompt = prompt;
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  request.sampling.temperature = 0;
  const auto start = Clock::now();
  RequestHandle handle = engine.submit(std::move(request));
  std::vector<StreamDelta> deltas;
  double first = -1;
  while (handle.stream->wait_drain(deltas)) {
    for (const StreamDelta& delta : deltas)
      if (first < 0 && !delta.text.empty()) first = micros(Clock::now() - start);
    deltas.clear();
  }
  return first;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

int run_ttft(const TtftOptions& options) {
  std::unique_ptr<Backend> backend;
  if (!options.model.empty()) {
    cli::ModelFlags flags;
    flags.model = options.model;
    BackendOptions backend_options;
    backend_options.device = "cpu";
    backend_options.max_model_len = 1024;
    backend_options.num_threads = options.threads;
    backend = create_backend(cli::load_model_from_flags(flags), backend_options);
  } else {
    backend = std::make_unique<PacedBackend>(fake_spec(1, 64), options.fake_step_ms);
  }
  EngineOptions engine_options;
  engine_options.enable_prefix_caching = false;  // every run prefills the whole prompt
  BenchServer server(*backend, engine_options, server::ServerOptions{}, options.tokenizer);

  const std::string content = "What is the capital of France? Answer briefly.";
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  const std::vector<int32_t> prompt = server.prompts().chat_prompt(inputs);
  const int max_tokens = 8;  // the first token's text may be an incomplete UTF-8 piece
  const std::string request = chat_request(content, max_tokens);
  std::vector<double> engine_us;
  std::vector<double> http_us;
  const auto idle_pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };
  for (int run = 0; run < options.runs + 3; ++run) {  // three warm-up rounds
    // Alternating which goes first, each after the same pause, so neither always finds warmer caches.
    double engine = 0;
    double http = 0;
    if (run % 2 == 0) {
      idle_pause();
      engine = engine_ttft_us(server.engine(), prompt, max_tokens);
      idle_pause();
      http = http_ttft_us(server.port(), request);
    } else {
      idle_pause();
      http = http_ttft_us(server.port(), request);
      idle_pause();
      engine = engine_ttft_us(server.engine(), prompt, max_tokens);
    }
    if (run < 3) continue;
    engine_us.push_back(engine);
    http_us.push_back(http);
  }
  std::vector<double> gaps;
  for (size_t i = 0; i < http_us.size(); ++i) gaps.push_back(http_us[i] - engine_us[i]);
  std::printf(
      "prompt %zu tokens, %d runs at idle: engine TTFT median %.0f us (p90 %.0f); HTTP TTFT median %.0f us "
      "(p90 %.0f); gap median %.0f us (p10 %.0f, p90 %.0f)\n",
      prompt.size(), options.runs, percentile(engine_us, 0.5), percentile(engine_us, 0.9), percentile(http_us, 0.5),
      percentile(http_us, 0.9), percentile(gaps, 0.5), percentile(gaps, 0.1), percentile(gaps, 0.9));
  return 0;
}

}  // namespace
}  // namespace qinfer::bench

int main(int argc, char** argv) {
  using namespace qinfer::bench;
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app("qinfer server benchmarks (docs/PERFORMANCE.md, Host side)");
  app.require_subcommand(1);
  const std::string default_tokenizer = std::string(QINFER_SOURCE_DIR) + "/.assets/qwen3-tokenizer";
  OverheadOptions overhead;
  overhead.tokenizer = default_tokenizer;
  CLI::App* overhead_cmd = app.add_subcommand("overhead", "HTTP CPU per streamed token, memory of open streams");
  overhead_cmd->add_option("--streams", overhead.streams, "Concurrent streams")->capture_default_str();
  overhead_cmd->add_option("--tokens", overhead.tokens, "Tokens per stream")->capture_default_str();
  overhead_cmd->add_option("--step-ms", overhead.step_ms, "Sleep per engine step")->capture_default_str();
  overhead_cmd->add_option("--tokenizer", overhead.tokenizer, "Directory with tokenizer.json")->capture_default_str();
  TtftOptions ttft;
  ttft.tokenizer = default_tokenizer;
  CLI::App* ttft_cmd = app.add_subcommand("ttft", "Engine vs HTTP time to first token at idle");
  ttft_cmd->add_option("--model", ttft.model,
                       "Model directory (e.g. the tiny test model); absent: the paced fake model");
  ttft_cmd->add_option("--fake-step-ms", ttft.fake_step_ms, "Without --model: sleep per engine step")
      ->capture_default_str();
  ttft_cmd->add_option("--runs", ttft.runs, "Measured runs")->capture_default_str();
  ttft_cmd->add_option("--threads", ttft.threads, "CPU backend threads")->capture_default_str();
  ttft_cmd->add_option("--tokenizer", ttft.tokenizer, "Directory with tokenizer.json")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (*overhead_cmd) return run_overhead(overhead);
    return run_ttft(ttft);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "server_bench: %s\n", e.what());
    return 1;
  }
}
