#include "engine/stop_strings.h"

#include <algorithm>

namespace qinfer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view text) {
  Result result;
  if (stopped_) return result;
  pending_.append(text);
  // Emitted text never ends in a prefix of a stop string, so any match starts inside pending_.
  size_t first_match = std::string::npos;
  for (const std::string& stop : stop_strings_) first_match = std::min(first_match, pending_.find(stop));
  if (first_match != std::string::npos) {
    result.text = pending_.substr(0, first_match);
    result.stopped = stopped_ = true;
    pending_.clear();
    return result;
  }
  size_t release = pending_.size() - held_suffix_length();
  result.text = pending_.substr(0, release);
  pending_.erase(0, release);
  return result;
}

std::string StopStringMatcher::flush() {
  std::string text;
  text.swap(pending_);
  return text;
}

size_t StopStringMatcher::held_suffix_length() const {
  size_t longest = 0;
  for (const std::string& stop : stop_strings_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > longest; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace qinfer
