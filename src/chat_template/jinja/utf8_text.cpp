#include "chat_template/jinja/utf8_text.h"

#include <utf8proc.h>

namespace qinfer::jinja {

char32_t decode_utf8(std::string_view text, size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t length = 0;
  char32_t cp = 0;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    cp = lead & 0x07;
  } else {
    ++pos;
    return lead;
  }
  if (pos + length > text.size()) {
    ++pos;
    return lead;
  }
  for (size_t i = 1; i < length; ++i) {
    const auto c = static_cast<unsigned char>(text[pos + i]);
    if ((c & 0xC0) != 0x80) {
      ++pos;
      return lead;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  pos += length;
  return cp;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

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
    decode_utf8(text, pos);
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
    const char32_t cp = decode_utf8(text, pos);
    const char32_t mapped = map(cp);
    if (mapped == cp) {
      out.append(text.substr(start, pos - start));
    } else {
      append_utf8(mapped, out);
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
    if (decode_utf8(chars, pos) == cp) return true;
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
      if (!strippable(decode_utf8(text, next))) break;
      begin = next;
    }
  }
  size_t end = text.size();
  if (side != StripSide::kLeft) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t next = start;
      const char32_t cp = decode_utf8(text, next);
      if (next != end || !strippable(cp)) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace qinfer::jinja
