// Python's text forms of numbers and strings: repr(float), repr(str), and json.dumps, which chat templates print
// through `{{ }}` and the `tojson` filter; the rendered prompt must match them byte for byte.
#pragma once

#include <string>
#include <string_view>

namespace qinfer::jinja {

class Value;

// repr(float): shortest round-trip digits, fixed notation for exponents -4..15 (with ".0" when integral), else
// "1e+16"/"1.5e-05"; "inf", "-inf", "nan".
void append_python_float(double value, std::string& out);

// repr(str): single quotes unless the text holds ' and no ", escapes \\ \n \r \t, other control characters and
// non-printable code points as \xNN / \uNNNN.
void append_python_string_repr(std::string_view text, std::string& out);

struct JsonStyle {
  bool ensure_ascii = false;  // transformers' tojson default
  int indent = -1;            // -1: None (one line)
  std::string indent_text;    // the string used per level when indent was given as a string
  bool indent_is_text = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value, ...) with Python's exact formatting. Throws Failure for values JSON cannot hold (Undefined,
// functions, non-string-like keys), like Python's TypeError.
void append_python_json(const Value& value, const JsonStyle& style, std::string& out);

}  // namespace qinfer::jinja
