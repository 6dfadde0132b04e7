#include "server/sse_stream.h"

#include <httplib.h>

#include "server/openai_response.h"
#include "util/logging.h"

namespace qinfer::server {

SseStream::SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output,
                     Engine& engine, RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight,
                     ServerMetrics& metrics)
    : work_(std::move(work)),
      output_(std::move(output)),
      engine_(engine),
      handle_(std::move(handle)),
      slot_(std::move(slot)),
      in_flight_(std::move(in_flight)),
      metrics_(metrics) {}

bool SseStream::pump(httplib::DataSink& sink) {
  if (ended_) return false;
  deltas_.clear();
  const bool more = handle_.stream->wait_drain(deltas_, kHeartbeatInterval);
  std::string events = output_->stream_events(deltas_);
  const bool failed = output_->failure().has_value();
  if (failed) events += sse_event(output_->failure()->to_json());
  if (!more || failed) {
    Usage usage = handle_.stream->usage();
    output_->record_finished(usage);
    events += failed ? std::string(kSseDone) : output_->stream_end(usage);
    ended_ = true;
  }
  // An SSE comment: clients ignore it; writing it tells us whether the client is still there.
  if (events.empty()) events = ": keep-alive\n\n";
  if (!sink.write(events.data(), events.size())) return false;
  if (ended_) sink.done();
  return true;
}

void SseStream::release(bool success) {
  if (ended_ && success) return;
  if (!handle_.stream->done()) {
    engine_.abort(handle_.id);
    metrics_.client_disconnects.inc();
    spdlog::info("request {}: client went away mid-stream, aborted", handle_.id);
  }
  in_flight_.reset();
  slot_.reset();
}

}  // namespace qinfer::server
