#include "grammar/json_text.h"

#include <cstdio>

namespace qinfer::grammar {
namespace {

// The escape JSON writes for a code point that may not appear raw in a string (empty for the others).
std::string escape_of(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      if (cp < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        return buf;
      }
      return {};
  }
}

}  // namespace

int32_t json_string_chars(Grammar& g, const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> raw;
  std::vector<int32_t> escapes;
  for (CodepointRange r : ranges) {
    for (uint32_t cp = r.first; cp <= r.last && cp < 0x80; ++cp)
      if (std::string e = escape_of(cp); !e.empty()) escapes.push_back(g.literal(e));
    // The raw part: the range without controls, '"' and '\'.
    uint32_t first = r.first;
    const auto emit = [&](uint32_t lo, uint32_t hi) {
      if (lo <= hi) raw.push_back({lo, hi});
    };
    if (first < 0x20) first = 0x20;
    for (uint32_t cut : {static_cast<uint32_t>('"'), static_cast<uint32_t>('\\')}) {
      if (first <= cut && cut <= r.last) {
        emit(first, cut - 1);
        first = cut + 1;
      }
    }
    emit(first, r.last);
  }
  std::vector<int32_t> alts;
  if (!raw.empty()) alts.push_back(g.codepoints(raw));
  alts.insert(alts.end(), escapes.begin(), escapes.end());
  return g.choice(std::move(alts));
}

int32_t json_any_string_char(Grammar& g) {
  ByteSet simple_escapes;
  for (char c : std::string("\"\\/bfnrt")) simple_escapes.set(static_cast<unsigned char>(c));
  ByteSet hex;
  for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<unsigned char>(c));
  const int32_t unicode_escape = g.sequence({g.byte('u'), g.repeat(g.bytes(hex), 4, 4)});
  const int32_t escape = g.sequence({g.byte('\\'), g.choice({g.bytes(simple_escapes), unicode_escape})});
  const int32_t raw = g.codepoints({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
  return g.choice({raw, escape});
}

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    const std::string e = escape_of(c);
    if (e.empty())
      out += static_cast<char>(c);
    else
      out += e;
  }
  return out + "\"";
}

}  // namespace qinfer::grammar
