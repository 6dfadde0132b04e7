#include "tokenizer/byte_level.h"

#include "util/utf8.h"

namespace qinfer::byte_level {
namespace {

// Printable bytes keep their own code point; the other 68 bytes take U+0100 onwards in byte order.
bool maps_to_itself(unsigned char byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

}  // namespace

char32_t char_for_byte(unsigned char byte) {
  if (maps_to_itself(byte)) return byte;
  char32_t next = 0x100;
  for (unsigned b = 0; b < byte; ++b) {
    if (!maps_to_itself(static_cast<unsigned char>(b))) ++next;
  }
  return next;
}

std::optional<std::string> decode_chars(std::string_view byte_level_text) {
  // Inverse table: U+0000..U+0143 → byte, -1 when the code point is not in the alphabet.
  struct Inverse {
    int byte_of[0x144];
    Inverse() {
      for (int& b : byte_of) b = -1;
      for (unsigned b = 0; b < 256; ++b) byte_of[char_for_byte(static_cast<unsigned char>(b))] = static_cast<int>(b);
    }
  };
  static const Inverse inverse;
  if (!utf8::is_valid(byte_level_text)) return std::nullopt;
  std::string bytes;
  bytes.reserve(byte_level_text.size());
  size_t pos = 0;
  while (pos < byte_level_text.size()) {
    const char32_t cp = utf8::decode_valid(byte_level_text, pos);
    if (cp >= 0x144 || inverse.byte_of[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(inverse.byte_of[cp]));
  }
  return bytes;
}

}  // namespace qinfer::byte_level
