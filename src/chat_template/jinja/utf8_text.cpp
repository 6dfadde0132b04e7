#include "chat_template/jinja/utf8_text.h"

#include <utf8proc.h>

#include "util/utf8.h"

namespace qinfer::jinja {

bool is_python_space(char32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85) return true;
  if (cp < 0x80) return false;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
}

bool is_alphanumeric(char32_t cp) {
  if (cp < 0x80) return is_letter(cp) || (cp >= '0' && cp <= '9');
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return is_letter(cp) || category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
         category == UTF8PROC_CATEGORY_NO;
}

std::vector<size_t> code_point_offsets(std::string_view text) {
  std::vector<size_t> offsets;
  offsets.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    offsets.push_back(pos);
    utf8::decode_lenient(text, pos);
  }
  offsets.push_back(text.size());
  return offsets;
}

namespace {

template <typename Map>
std::string map_code_points(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = utf8::decode_lenient(text, pos);
    const char32_t mapped = map(cp);
    if (mapped == cp) {
      out.append(text.substr(start, pos - start));
    } else {
      utf8::append(out, mapped);
    }
  }
  return out;
}

char32_t upper_of(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}

char32_t lower_of(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

bool is_cased_letter(char32_t cp) { return upper_of(cp) != cp || lower_of(cp) != cp; }

bool in_chars(char32_t cp, const std::string& chars) {
  size_t pos = 0;
  while (pos < chars.size()) {
    if (utf8::decode_lenient(chars, pos) == cp) return true;
  }
  return false;
}

}  // namespace

std::string to_upper(std::string_view text) { return map_code_points(text, upper_of); }
std::string to_lower(std::string_view text) { return map_code_points(text, lower_of); }

std::string to_title(std::string_view text) {
  bool previous_cased = false;
  return map_code_points(text, [&](char32_t cp) {
    const char32_t mapped = previous_cased ? lower_of(cp) : upper_of(cp);
    previous_cased = is_cased_letter(cp);
    return mapped;
  });
}

std::string capitalize(std::string_view text) {
  bool first = true;
  return map_code_points(text, [&](char32_t cp) {
    const char32_t mapped = first ? upper_of(cp) : lower_of(cp);
    first = false;
    return mapped;
  });
}

std::string_view strip(std::string_view text, const std::string* chars, StripSide side) {
  auto strippable = [&](char32_t cp) { return chars == nullptr ? is_python_space(cp) : in_chars(cp, *chars); };
  size_t begin = 0;
  if (side != StripSide::kRight) {
    while (begin < text.size()) {
      size_t next = begin;
      if (!strippable(utf8::decode_lenient(text, next))) break;
      begin = next;
    }
  }
  size_t end = text.size();
  if (side != StripSide::kLeft) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && utf8::is_continuation_byte(text[start])) --start;
      size_t next = start;
      const char32_t cp = utf8::decode_lenient(text, next);
      if (next != end || !strippable(cp)) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace qinfer::jinja
