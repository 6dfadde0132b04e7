// One streamed response: drains the request's deltas from the engine and turns them into SSE events. The events are
// written by the server's SseWriter (one event-loop thread for every stream, see sse_writer.h): the connection thread,
// inside httplib's chunked content provider after the headers went out, hands its socket over and sleeps until the
// stream is over, then lets httplib write the terminating chunk. A client that hangs up, stops reading for longer
// than --write-timeout or fails a send gets its request aborted in the engine, which frees its KV blocks within one
// step. When the connection's socket cannot be found, the connection thread writes the events itself (waiting on the
// request, with a keep-alive comment every SseWriter::kKeepAliveInterval).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/admission.h"
#include "server/completion_output.h"
#include "server/server_state.h"
#include "server/sse_writer.h"

namespace httplib {
class DataSink;
}

namespace qinfer::server {

class SseStream : public SseSource {
 public:
  // `channel` is the one the engine request notifies (GenerationRequest::on_output); `socket` the connection's, when
  // found.
  SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output, Engine& engine,
            RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight, ServerMetrics& metrics,
            SseWriter& writer, std::shared_ptr<SseWriter::Channel> channel, std::optional<int> socket);

  // httplib content provider: writes the whole stream (through the writer) and ends it. False cancels.
  bool pump(httplib::DataSink& sink);
  // httplib resource releaser: `success` is false when the client went away or a write failed.
  void release(bool success);

  // SseSource, on the writer thread: the events of every delta queued so far; true once [DONE] was appended.
  bool take_events(std::string& out) override;

 private:
  // Appends the events of the deltas queued within `wait`; sets ended_ with the last ones.
  void collect(std::string& out, std::chrono::milliseconds wait);
  // Without the connection's socket: the connection thread waits for deltas and writes them through `sink`.
  bool pump_through_sink(httplib::DataSink& sink);

  std::shared_ptr<const CompletionWork> work_;  // the output refers to it
  std::unique_ptr<CompletionOutput> output_;
  Engine& engine_;
  RequestHandle handle_;
  std::optional<Admission::Slot> slot_;
  std::optional<InFlightRequests::Entry> in_flight_;
  ServerMetrics& metrics_;
  SseWriter& writer_;
  std::shared_ptr<SseWriter::Channel> channel_;
  std::optional<int> socket_;
  std::vector<StreamDelta> deltas_;  // reused by every drain
  bool ended_ = false;               // [DONE] appended
};

}  // namespace qinfer::server
