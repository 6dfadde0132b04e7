// Incremental reader of a text/event-stream body (the WHATWG "event stream" interpretation, reduced to what a client
// of OpenAI-style streams needs): bytes arrive in chunks split anywhere; lines end with LF, CRLF or CR; lines starting
// with ':' are comments; `data:` lines (one optional space after the colon) of one event are joined with '\n'; a blank
// line dispatches the event if it has data. Other fields (event, id, retry) are ignored.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace qinfer::loadgen {

class SseReader {
 public:
  using EventHandler = std::function<void(std::string_view data)>;

  // Consumes a chunk of the body; calls on_event for every event completed by it, in order.
  void feed(std::string_view bytes, const EventHandler& on_event);

  // True when bytes of an unfinished line or event are buffered (a stream that ends here was cut short).
  bool has_partial_event() const { return !line_.empty() || has_data_; }

 private:
  void process_line(const EventHandler& on_event);

  std::string line_;       // the current line, without its terminator
  std::string data_;       // data of the current event so far
  bool has_data_ = false;  // a data line was seen in the current event (data may still be empty)
  bool after_cr_ = false;  // the previous byte was CR: a following LF belongs to the same line ending
};

}  // namespace qinfer::loadgen
