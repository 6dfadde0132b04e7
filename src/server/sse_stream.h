// One streamed response: drains the request's deltas from the engine and turns them into SSE events, which the HTTP
// layer's event loop writes (http_session.h). The engine thread notifies the stream's StreamWakeup after each push;
// one wake-up drains every delta queued by then into one chunk. A client that hangs up, stops reading for longer
// than --write-timeout or fails a send gets its request aborted in the engine, which frees its KV blocks within one
// step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/admission.h"
#include "server/completion_output.h"
#include "server/http_message.h"
#include "server/server_state.h"

namespace qinfer::server {

class SseStream : public EventStream {
 public:
  // `wakeup` is the one the engine request notifies (GenerationRequest::on_output).
  SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output, Engine& engine,
            RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight, ServerMetrics& metrics,
            std::shared_ptr<StreamWakeup> wakeup);

  bool take_events(std::string& out) override;
  void finish(bool delivered) override;
  StreamWakeup& wakeup() override { return *wakeup_; }

 private:
  std::shared_ptr<const CompletionWork> work_;  // the output refers to it
  std::unique_ptr<CompletionOutput> output_;
  Engine& engine_;
  RequestHandle handle_;
  std::optional<Admission::Slot> slot_;
  std::optional<InFlightRequests::Entry> in_flight_;
  ServerMetrics& metrics_;
  std::shared_ptr<StreamWakeup> wakeup_;
  std::vector<StreamDelta> deltas_;  // reused by every drain
  bool ended_ = false;               // [DONE] appended
};

}  // namespace qinfer::server
