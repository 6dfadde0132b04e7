// One streamed response: pulls the request's deltas from the engine and writes them as SSE through httplib's chunked
// content provider (on the connection's thread). While no token arrives it sends an SSE comment every
// kHeartbeatInterval, so that a vanished client is noticed by a failed write; a failed write aborts the request in
// the engine, which frees its KV blocks within one step.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "engine/engine.h"
#include "server/admission.h"
#include "server/completion_output.h"
#include "server/server_state.h"

namespace httplib {
class DataSink;
}

namespace qinfer::server {

class SseStream {
 public:
  static constexpr std::chrono::milliseconds kHeartbeatInterval{1000};

  SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output, Engine& engine,
            RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight, ServerMetrics& metrics);

  // httplib content provider: writes what is ready (waiting up to the heartbeat interval). False cancels.
  bool pump(httplib::DataSink& sink);
  // httplib resource releaser: `success` is false when the client went away or a write failed.
  void release(bool success);

 private:
  std::shared_ptr<const CompletionWork> work_;  // the output refers to it
  std::unique_ptr<CompletionOutput> output_;
  Engine& engine_;
  RequestHandle handle_;
  std::optional<Admission::Slot> slot_;
  std::optional<InFlightRequests::Entry> in_flight_;
  ServerMetrics& metrics_;
  std::vector<StreamDelta> deltas_;  // reused by every pump
  bool ended_ = false;               // [DONE] written
};

}  // namespace qinfer::server
