// Stop strings over streamed text. Text that might be the start of a stop string is held back until it is known
// not to be; when a stop string completes, the text before it is released and generation stops (the stop string
// itself is not part of the output).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; nothing more will be emitted
  };

  // Adds newly decoded text. After a stop, further pushes return nothing.
  Result push(std::string_view text);
  // Releases the held-back text (generation ended for another reason).
  std::string flush();

 private:
  size_t held_suffix_length() const;

  std::vector<std::string> stop_strings_;
  std::string pending_;  // held back: a suffix that is a proper prefix of some stop string
  bool stopped_ = false;
};

}  // namespace qinfer
