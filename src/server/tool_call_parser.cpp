#include "server/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace qinfer::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

// Length of the longest suffix of `text` that is a proper prefix of `tag` (text that may become the tag).
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len)
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

std::string_view trim(std::string_view text) {
  const char* space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(space) - begin + 1);
}

}  // namespace

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  buffer_.append(text);
  while (true) {
    if (!in_call_) {
      size_t open = buffer_.find(kOpen);
      if (open == std::string::npos) {
        size_t hold = partial_tag_suffix(buffer_, kOpen);
        out.content += buffer_.substr(0, buffer_.size() - hold);
        buffer_.erase(0, buffer_.size() - hold);
        return out;
      }
      out.content += buffer_.substr(0, open);
      buffer_.erase(0, open + kOpen.size());
      in_call_ = true;
      scanned_ = 0;
      in_string_ = escaped_ = false;
    }
    size_t close = find_close();
    if (close == std::string::npos) return out;
    const std::string_view body = std::string_view(buffer_).substr(0, close);
    // Not a call we understand: keep the model's text visible rather than dropping it.
    if (!parse_call(body, out)) out.content += unparsed_call_text(body) + std::string(kClose);
    buffer_.erase(0, close + kClose.size());
    in_call_ = false;
  }
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  // A call left open whose body is complete (the model stopped right after the JSON, e.g. at a stop token) counts.
  if (in_call_ && !parse_call(buffer_, out)) out.content = unparsed_call_text(buffer_);
  if (!in_call_) out.content = buffer_;
  buffer_.clear();
  in_call_ = false;
  return out;
}

size_t ToolCallParser::find_close() {
  for (; scanned_ < buffer_.size(); ++scanned_) {
    const char c = buffer_[scanned_];
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == kClose[0]) {
      const std::string_view rest = std::string_view(buffer_).substr(scanned_, kClose.size());
      if (rest == kClose) return scanned_;
      if (kClose.starts_with(rest)) break;  // may still become the tag: scan it again with more text
    }
  }
  return std::string::npos;
}

std::string ToolCallParser::unparsed_call_text(std::string_view body) { return std::string(kOpen) + std::string(body); }

bool ToolCallParser::parse_call(std::string_view body, Output& out) {
  nlohmann::ordered_json call = nlohmann::ordered_json::parse(trim(body), nullptr, false);
  bool valid = call.is_object() && call.contains("name") && call["name"].is_string();
  if (valid && call.contains("arguments")) {
    const auto& arguments = call["arguments"];
    valid = arguments.is_object() ||
            (arguments.is_string() && nlohmann::json::parse(arguments.get<std::string>(), nullptr, false).is_object());
  }
  if (!valid) return false;
  ParsedToolCall parsed;
  parsed.name = call["name"].get<std::string>();
  if (!call.contains("arguments")) {
    parsed.arguments = "{}";
  } else if (call["arguments"].is_string()) {
    parsed.arguments = call["arguments"].get<std::string>();
  } else {
    parsed.arguments = call["arguments"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  out.calls.push_back(std::move(parsed));
  ++num_calls_;
  return true;
}

}  // namespace qinfer::server
