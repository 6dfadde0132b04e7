#include "loadgen/sse_reader.h"

namespace qinfer::loadgen {

void SseReader::feed(std::string_view bytes, const EventHandler& on_event) {
  size_t pos = 0;
  if (after_cr_ && !bytes.empty()) {
    if (bytes.front() == '\n') pos = 1;
    after_cr_ = false;
  }
  while (pos < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(pos));
      return;
    }
    line_.append(bytes.substr(pos, end - pos));
    pos = end + 1;
    if (bytes[end] == '\r') {
      if (pos < bytes.size()) {
        if (bytes[pos] == '\n') ++pos;
      } else {
        after_cr_ = true;
      }
    }
    process_line(on_event);
  }
}

void SseReader::process_line(const EventHandler& on_event) {
  if (line_.empty()) {
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  const std::string_view line = line_;
  if (line.front() != ':') {
    const size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    if (field == "data") {
      std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace qinfer::loadgen
