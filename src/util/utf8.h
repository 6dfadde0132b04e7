// The one UTF-8 codec of the project: decoding code points, encoding them, and the documented policies for invalid
// input — the tokenizer replaces each maximal invalid subsequence by U+FFFD, exactly as Rust's
// String::from_utf8_lossy does (so HF tokenizers' decode and ours agree byte for byte); the chat-template
// interpreter reads an invalid byte as one code point of its own value (`decode_lenient`), so any text round-trips.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qinfer::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Length of the valid UTF-8 sequence starting at text[pos], or 0 when the bytes there are not a complete valid
// sequence. Valid means shortest form, no surrogates, at most U+10FFFF.
size_t valid_sequence_length(std::string_view text, size_t pos);

// Decodes the code point at text[pos] of text already known to be valid UTF-8; advances pos.
inline char32_t decode_valid(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    pos += 1;
    return lead;
  }
  if (lead < 0xE0) {
    char32_t cp = ((lead & 0x1Fu) << 6) | (byte(pos + 1) & 0x3Fu);
    pos += 2;
    return cp;
  }
  if (lead < 0xF0) {
    char32_t cp = ((lead & 0x0Fu) << 12) | ((byte(pos + 1) & 0x3Fu) << 6) | (byte(pos + 2) & 0x3Fu);
    pos += 3;
    return cp;
  }
  char32_t cp = ((lead & 0x07u) << 18) | ((byte(pos + 1) & 0x3Fu) << 12) | ((byte(pos + 2) & 0x3Fu) << 6) |
                (byte(pos + 3) & 0x3Fu);
  pos += 4;
  return cp;
}

inline bool is_continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// Start of the code point that ends at text[pos - 1] in valid text (pos > 0): steps back over continuation bytes.
inline size_t previous_start(std::string_view text, size_t pos) {
  do --pos;
  while (pos > 0 && is_continuation_byte(text[pos]));
  return pos;
}

// Decodes the code point at text[pos] of any text and advances pos: a valid sequence gives its code point, any other
// byte gives its own value and advances by one.
inline char32_t decode_lenient(std::string_view text, size_t& pos) {
  if (static_cast<unsigned char>(text[pos]) < 0x80 || valid_sequence_length(text, pos) != 0) {
    return decode_valid(text, pos);
  }
  return static_cast<unsigned char>(text[pos++]);
}

// Number of decode_lenient steps over text (the code points of valid text).
size_t count_code_points(std::string_view text);

// Appends the UTF-8 encoding of cp (which must be a Unicode scalar value).
void append(std::string& out, char32_t cp);

bool is_valid(std::string_view text);

// Returns text with every maximal invalid subsequence replaced by U+FFFD (Rust's from_utf8_lossy).
std::string to_valid_lossy(std::string_view text);

// Length of the longest prefix of `bytes` after which no more bytes can change how the prefix decodes: everything
// except a trailing incomplete-but-so-far-valid sequence. Used for streaming (hold back a partial character).
size_t stable_prefix_length(std::string_view bytes);

}  // namespace qinfer::utf8
