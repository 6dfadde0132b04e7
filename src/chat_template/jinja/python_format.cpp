#include "chat_template/jinja/python_format.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat_template/jinja/utf8_text.h"
#include "chat_template/jinja/value.h"
#include "util/utf8.h"

namespace qinfer::jinja {

namespace {

// Python's str.isprintable() for one code point: not in categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and not a separator
// other than the ASCII space.
bool is_python_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void append_hex(uint32_t value, int digits, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(value >> shift) & 0xF];
}

void append_escaped_code_point(char32_t cp, std::string& out) {
  if (cp < 0x100) {
    out += "\\x";
    append_hex(cp, 2, out);
  } else if (cp < 0x10000) {
    out += "\\u";
    append_hex(cp, 4, out);
  } else {
    out += "\\U";
    append_hex(cp, 8, out);
  }
}

void append_json_string(std::string_view text, bool ensure_ascii, std::string& out) {
  out += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c >= 0x80) {
      const size_t start = pos;
      const char32_t cp = utf8::decode_lenient(text, pos);
      if (!ensure_ascii) {
        out.append(text.substr(start, pos - start));
      } else if (cp >= 0x10000) {  // UTF-16 surrogate pair, as Python writes it
        const char32_t v = cp - 0x10000;
        out += "\\u";
        append_hex(0xD800 + (v >> 10), 4, out);
        out += "\\u";
        append_hex(0xDC00 + (v & 0x3FF), 4, out);
      } else {
        out += "\\u";
        append_hex(cp, 4, out);
      }
      continue;
    }
    ++pos;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
          out += "\\u";
          append_hex(c, 4, out);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_newline_indent(const JsonStyle& style, int level, std::string& out) {
  out += '\n';
  for (int i = 0; i < level; ++i) {
    if (style.indent_is_text) {
      out += style.indent_text;
    } else {
      out.append(static_cast<size_t>(style.indent), ' ');
    }
  }
}

bool pretty(const JsonStyle& style) { return style.indent_is_text || style.indent >= 0; }

// Python's json converts non-string keys: True -> "true", None -> "null", numbers via repr.
std::string json_key_text(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.str();
    case Value::Kind::kBool:
      return key.as_bool() ? "true" : "false";
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kInt:
      return std::to_string(key.as_int());
    case Value::Kind::kFloat: {
      std::string text;
      append_python_float(key.as_double(), text);
      return text;
    }
    default:
      throw Failure("keys must be str, int, float, bool or None, not " + key.type_name());
  }
}

void append_json_value(const Value& value, const JsonStyle& style, int level, std::string& out) {
  if (level > 512) throw Failure("tojson: value nested too deeply");
  switch (value.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(value.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = value.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        append_python_float(d, out);
      }
      return;
    }
    case Value::Kind::kString:
      append_json_string(value.str(), style.ensure_ascii, out);
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const ValueList& items = value.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        if (pretty(style)) append_newline_indent(style, level + 1, out);
        append_json_value(items[i], style, level + 1, out);
      }
      if (pretty(style)) append_newline_indent(style, level, out);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (value.entries().empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> members;
      members.reserve(value.entries().size());
      for (const auto& [key, element] : value.entries()) members.emplace_back(json_key_text(key), &element);
      if (style.sort_keys) {
        std::stable_sort(members.begin(), members.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out += style.item_separator;
        if (pretty(style)) append_newline_indent(style, level + 1, out);
        append_json_string(members[i].first, style.ensure_ascii, out);
        out += style.key_separator;
        append_json_value(*members[i].second, style, level + 1, out);
      }
      if (pretty(style)) append_newline_indent(style, level, out);
      out += '}';
      return;
    }
    default:
      throw Failure("Object of type " + value.python_type() + " is not JSON serializable");
  }
}

}  // namespace

void append_python_float(double value, std::string& out) {
  if (std::isnan(value)) {
    out += "nan";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "inf" : "-inf";
    return;
  }
  // Shortest round-trip digits in scientific form "d.ddde±XX", then laid out the way Python's repr does.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));
  const size_t e_pos = sci.find('e');
  std::string_view mantissa = sci.substr(0, e_pos);
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(), exponent);
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.remove_prefix(1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (negative) out += '-';
  if (exponent >= -4 && exponent < 16) {
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(point) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point));
      out += '.';
      out += digits.substr(static_cast<size_t>(point));
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exponent_text;
}

void append_python_string_repr(std::string_view text, std::string& out) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = utf8::decode_lenient(text, pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || !is_python_printable(cp)) {
      append_escaped_code_point(cp, out);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  out += quote;
}

void append_python_json(const Value& value, const JsonStyle& style, std::string& out) {
  append_json_value(value, style, 0, out);
}

}  // namespace qinfer::jinja
