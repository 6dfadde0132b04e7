#include "server/sse_stream.h"

#include <httplib.h>

#include "server/openai_response.h"
#include "util/logging.h"

namespace qinfer::server {

SseStream::SseStream(std::shared_ptr<const CompletionWork> work, std::unique_ptr<CompletionOutput> output,
                     Engine& engine, RequestHandle handle, Admission::Slot slot, InFlightRequests::Entry in_flight,
                     ServerMetrics& metrics, SseWriter& writer, std::shared_ptr<SseWriter::Channel> channel,
                     std::optional<int> socket)
    : work_(std::move(work)),
      output_(std::move(output)),
      engine_(engine),
      handle_(std::move(handle)),
      slot_(std::move(slot)),
      in_flight_(std::move(in_flight)),
      metrics_(metrics),
      writer_(writer),
      channel_(std::move(channel)),
      socket_(socket) {}

void SseStream::collect(std::string& out, std::chrono::milliseconds wait) {
  if (ended_) return;
  deltas_.clear();
  // The engine pushes the last delta, closes the stream and then notifies once: a drain that took the last delta
  // must see the end itself.
  const bool more = handle_.stream->wait_drain(deltas_, wait) && !handle_.stream->done();
  out += output_->stream_events(deltas_);
  const bool failed = output_->failure().has_value();
  if (failed) out += sse_event(output_->failure()->to_json());
  if (!more || failed) {
    Usage usage = handle_.stream->usage();
    output_->record_finished(usage);
    out += failed ? std::string(kSseDone) : output_->stream_end(usage);
    ended_ = true;
  }
}

bool SseStream::take_events(std::string& out) {
  collect(out, std::chrono::milliseconds(0));
  return ended_;
}

bool SseStream::pump(httplib::DataSink& sink) {
  if (ended_) return false;
  if (!socket_) return pump_through_sink(sink);
  if (!writer_.write(channel_, *socket_, *this)) return false;
  sink.done();
  return true;
}

bool SseStream::pump_through_sink(httplib::DataSink& sink) {
  std::string events;
  collect(events, SseWriter::kKeepAliveInterval);
  // An SSE comment: clients ignore it; writing it tells us whether the client is still there.
  if (events.empty()) events = SseWriter::kKeepAliveComment;
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
  if (!ended_) output_->record_abandoned(*handle_.stream);
  in_flight_.reset();
  slot_.reset();
}

}  // namespace qinfer::server
