#include "server/sse_stream.h"

#include "server/openai_response.h"
#include "util/logging.h"

namespace qinfer::server {

SseStream::SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output,
                     Engine& engine, RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight,
                     ServerMetrics& metrics, std::shared_ptr<StreamWakeup> wakeup)
    : work_(std::move(work)),
      output_(std::move(output)),
      engine_(engine),
      handle_(std::move(handle)),
      slot_(std::move(slot)),
      in_flight_(std::move(in_flight)),
      metrics_(metrics),
      wakeup_(std::move(wakeup)) {}

bool SseStream::take_events(std::string& out) {
  if (ended_) return true;
  deltas_.clear();
  // The engine pushes the last delta, closes the stream and then notifies once: a drain that took the last delta
  // must see the end itself.
  const bool more = handle_.stream->wait_drain(deltas_, std::chrono::milliseconds(0)) && !handle_.stream->done();
  out += output_->stream_events(deltas_);
  const bool failed = output_->failure().has_value();
  if (failed) out += sse_event(output_->failure()->to_json());
  if (!more || failed) {
    Usage usage = handle_.stream->usage();
    output_->record_finished(usage);
    out += failed ? std::string(kSseDone) : output_->stream_end(usage);
    ended_ = true;
  }
  return ended_;
}

void SseStream::finish(bool delivered) {
  if (!(ended_ && delivered) && !handle_.stream->done()) {
    engine_.abort(handle_.id);
    metrics_.client_disconnects.inc();
    spdlog::info("request {}: client went away mid-stream, aborted", handle_.id);
  }
  if (!ended_) output_->record_abandoned(*handle_.stream);
  in_flight_.reset();
  slot_.reset();
}

}  // namespace qinfer::server
