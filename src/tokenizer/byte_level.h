// GPT-2's byte-level alphabet: every byte maps to one printable code point so byte strings can live in a JSON vocab
// (e.g. the space byte 0x20 is written 'Ġ' U+0120). Vocab and merge strings of tokenizer.json use this alphabet.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qinfer::byte_level {

// The code point that stands for `byte`.
char32_t char_for_byte(unsigned char byte);

// The raw bytes of a string written in the byte-level alphabet, or nullopt when some character is not in it.
std::optional<std::string> decode_chars(std::string_view byte_level_text);

}  // namespace qinfer::byte_level
