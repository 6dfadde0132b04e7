// Everything `qinfer serve` configures in the HTTP layer (the engine has its own EngineOptions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;                    // empty: no authentication
  std::vector<std::string> cors_origins;  // allowed Origin values; "*" allows any; empty: no CORS headers
  size_t max_body_bytes = 4u << 20;       // larger bodies (chunked ones too) get 413
  size_t max_header_bytes = 64u << 10;    // request line + headers; beyond: 431 (414 for the request line)
  size_t max_header_count = 100;          // header lines; beyond: 431
  double header_timeout_seconds = 10;     // deadline for a request's headers, from its first byte
  int read_timeout_seconds = 30;          // deadline for a request's body, from the end of its headers
  int write_timeout_seconds = 30;         // a response write; a stream chunk: a client that stops reading is dropped
  int keep_alive_timeout_seconds = 5;
  int32_t max_concurrent_requests = 256;  // generation requests handed to the engine at once
  int32_t max_queue_len = 256;            // more wait for a slot; beyond that: 429
  double request_timeout_seconds = 600;   // per-request deadline, queueing included
  double shutdown_grace_seconds = 30;     // SIGTERM: time in-flight requests get to finish
  size_t response_cache_size = 0;         // entries; 0: off
  double health_stall_seconds = 60;       // /health fails when the engine has work but no step ran for this long
  int retry_after_seconds = 1;            // Retry-After sent with 429
  int http_threads = 0;                   // IO (event-loop) threads; 0: the cores, at most 4
  bool log_requests = true;               // one info line per finished request (--disable-log-requests: off)
  bool vllm_metrics = false;              // --metrics-compat vllm: also export vLLM's metric names
  std::string metrics_model_name;         // the model_name label of vLLM's metrics (the served model name)
  std::string reasoning_parser;           // --reasoning-parser: "" (off) or "qwen3"
};

}  // namespace qinfer::server
