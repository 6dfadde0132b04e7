// Unicode facts the tokenizer needs, taken from utf8proc's tables (Unicode 15 in Debian 12): the character classes
// of the split regexes, and NFC normalization.
#pragma once

#include <string>
#include <string_view>

namespace qinfer::unicode {

// Classes as the Qwen2/Llama3 split regexes see a code point (Oniguruma semantics, as HF tokenizers uses):
// kLetter = \p{L}; kNumber = \p{N}; kNewline = \r or \n; kSpace = other \s (\t \v \f, space, U+0085, Zs, Zl, Zp);
// kOther = everything else ([^\s\p{L}\p{N}]).
enum class CharClass : unsigned char { kLetter, kNumber, kNewline, kSpace, kOther };

CharClass classify(char32_t cp);

inline bool is_whitespace(CharClass c) { return c == CharClass::kNewline || c == CharClass::kSpace; }

// Rust regex's \w (alphabetic, marks, decimal digits, connector punctuation, join controls), approximated by
// general categories; used only for the `single_word` flag of added tokens.
bool is_word_char(char32_t cp);

// Rust's char::is_whitespace (the White_Space property), used for added tokens' lstrip/rstrip.
bool is_white_space(char32_t cp);

// True when NFC cannot change text (all code points are stable starters): the common fast path.
bool is_nfc_stable(std::string_view valid_utf8);

// NFC of valid UTF-8 text.
std::string to_nfc(std::string_view valid_utf8);

}  // namespace qinfer::unicode
