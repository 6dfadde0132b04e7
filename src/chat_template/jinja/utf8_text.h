// UTF-8 helpers for the Python string semantics chat templates rely on (len, strip, split, upper/lower, slicing).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qinfer::jinja {

// Code points are read with utf8::decode_lenient (util/utf8.h): a malformed byte reads as itself, so text that is not
// valid UTF-8 still round-trips byte for byte.

// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);
// Python's str.isalpha() (Unicode letters) and str.isalnum() (letters and numbers) for one code point.
bool is_letter(char32_t cp);
bool is_alphanumeric(char32_t cp);

// Byte offsets of every code point start, plus text.size() at the end.
std::vector<size_t> code_point_offsets(std::string_view text);

// Python str.upper() / lower() / title() / capitalize(), per code point (no multi-character case mappings).
std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
std::string to_title(std::string_view text);
std::string capitalize(std::string_view text);

// Python str.strip(chars) family. `chars` null: whitespace.
enum class StripSide { kLeft, kRight, kBoth };
std::string_view strip(std::string_view text, const std::string* chars, StripSide side);

}  // namespace qinfer::jinja
