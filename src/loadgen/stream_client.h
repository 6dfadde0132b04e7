// Streams many POST requests at once from ONE thread: a libcurl multi handle driven by its socket interface
// (curl_multi_socket_action) over epoll, so the cost per wake-up is the sockets that are ready, not all transfers.
// HTTP is libcurl's; the SSE framing is SseReader's; each event is read by parse_completion_chunk.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loadgen/request_record.h"
#include "util/curl_api.h"

namespace qinfer::loadgen {

struct StreamTarget {
  std::string url;      // the endpoint, e.g. http://127.0.0.1:8000/v1/completions
  std::string api_key;  // `Authorization: Bearer KEY` when not empty
  double request_timeout_seconds = 600;
};

// When requests start: at most max_in_flight at once (0: no cap), and request i not before arrivals_s[i] (seconds
// from the start of the run; empty: as soon as a slot is free). The last side_requests bodies are a second lane beside
// that schedule (the long prompts of a mixed workload): started in order from the start of the run, at most
// side_max_in_flight of them at once, outside max_in_flight and the arrivals (which then cover the other bodies).
struct LoadSchedule {
  int max_in_flight = 0;
  std::vector<double> arrivals_s;
  size_t side_requests = 0;
  int side_max_in_flight = 1;
};

struct LoadProgress {
  int started = 0;
  int finished = 0;
  int failed = 0;
  long text_events = 0;
  double elapsed_s = 0;
};

struct LoadRun {
  std::vector<RequestRecord> records;  // one per body, in the order given
  double duration_s = 0;               // first send → last request finished
  double client_cpu_seconds = 0;       // CPU time of the event-loop thread during the run (user + system)
  int peak_in_flight = 0;
};

class StreamClient {
 public:
  // `curl` must outlive the client.
  StreamClient(const CurlApi& curl, StreamTarget target);
  ~StreamClient();
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  // Sends every body (JSON) and streams the answers on the calling thread; on_progress is called about every 100 ms
  // and once at the end. Connections are kept between runs.
  LoadRun run(const std::vector<std::string>& bodies, const LoadSchedule& schedule,
              const std::function<void(const LoadProgress&)>& on_progress);

  struct Loop;

 private:
  const CurlApi& curl_;
  StreamTarget target_;
  std::unique_ptr<Loop> loop_;
};

}  // namespace qinfer::loadgen
