#include "util/utf8.h"

namespace qinfer::utf8 {
namespace {

// Expected length of a sequence with this lead byte and the valid range of its second byte (Unicode Table 3-7);
// length 0 for bytes that can never start a sequence.
struct LeadInfo {
  int length;
  unsigned char second_min;
  unsigned char second_max;
};

LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead < 0xC2) return {0, 0, 0};
  if (lead < 0xE0) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead < 0xF0) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead < 0xF4) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes at text[pos] that form a valid (possibly incomplete) prefix of a sequence, and its full length.
struct PrefixInfo {
  size_t valid_bytes;
  size_t full_length;
};

PrefixInfo valid_prefix(std::string_view text, size_t pos) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(text[pos]));
  if (info.length == 0) return {0, 0};
  size_t valid = 1;
  for (int i = 1; i < info.length && pos + i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const unsigned char lo = i == 1 ? info.second_min : 0x80;
    const unsigned char hi = i == 1 ? info.second_max : 0xBF;
    if (byte < lo || byte > hi) break;
    ++valid;
  }
  return {valid, static_cast<size_t>(info.length)};
}

}  // namespace

size_t valid_sequence_length(std::string_view text, size_t pos) {
  const PrefixInfo info = valid_prefix(text, pos);
  return info.valid_bytes == info.full_length ? info.full_length : 0;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (pos + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t length = valid_sequence_length(text, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

size_t count_code_points(std::string_view text) {
  size_t count = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    decode_lenient(text, pos);
    ++count;
  }
  return count;
}

std::string to_valid_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    const PrefixInfo info = valid_prefix(text, pos);
    if (info.valid_bytes != 0 && info.valid_bytes == info.full_length) {
      out.append(text.substr(pos, info.full_length));
      pos += info.full_length;
    } else {
      // A maximal subpart of an invalid sequence (at least one byte) becomes one replacement character.
      append(out, kReplacementChar);
      pos += info.valid_bytes == 0 ? 1 : info.valid_bytes;
    }
  }
  return out;
}

size_t stable_prefix_length(std::string_view bytes) {
  // A held-back tail is at most 3 bytes: look at the last sequence start within the final 3 bytes.
  const size_t begin = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = begin; pos < bytes.size(); ++pos) {
    const PrefixInfo info = valid_prefix(bytes, pos);
    if (info.valid_bytes > 1 || (info.valid_bytes == 1 && info.full_length > 1)) {
      // A sequence starting here is still a valid prefix running to the end: hold it back.
      if (pos + info.valid_bytes == bytes.size() && info.valid_bytes < info.full_length) return pos;
    }
  }
  return bytes.size();
}

}  // namespace qinfer::utf8
