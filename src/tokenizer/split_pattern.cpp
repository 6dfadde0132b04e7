#include "tokenizer/split_pattern.h"

#include "tokenizer/unicode_classes.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

using unicode::CharClass;

// Text decoded once into code points with their classes and byte offsets, so the matcher can look ahead freely.
struct CodePoints {
  std::vector<char32_t> cps;
  std::vector<CharClass> classes;
  std::vector<size_t> offsets;  // [n + 1] byte offset of each code point, then the text size

  void assign(std::string_view text) {
    cps.clear();
    classes.clear();
    offsets.clear();
    size_t pos = 0;
    while (pos < text.size()) {
      offsets.push_back(pos);
      const char32_t cp = utf8::decode_valid(text, pos);
      cps.push_back(cp);
      classes.push_back(unicode::classify(cp));
    }
    offsets.push_back(text.size());
  }
  size_t size() const { return cps.size(); }
};

char32_t fold_ascii(char32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: the match length in code points, or 0.
size_t match_contraction(const CodePoints& t, size_t i) {
  if (t.cps[i] != '\'' || i + 1 >= t.size()) return 0;
  const char32_t c1 = fold_ascii(t.cps[i + 1]);
  if (c1 == 's' || c1 == 0x17F || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= t.size()) return 0;
  const char32_t c2 = fold_ascii(t.cps[i + 2]);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

size_t run_end(const CodePoints& t, size_t i, CharClass c) {
  while (i < t.size() && t.classes[i] == c) ++i;
  return i;
}

size_t whitespace_run_end(const CodePoints& t, size_t i) {
  while (i < t.size() && unicode::is_whitespace(t.classes[i])) ++i;
  return i;
}

// End (exclusive, in code points) of the regex match starting at i; every position matches some alternative.
size_t match_at(const CodePoints& t, size_t i, size_t max_digits) {
  const size_t n = t.size();
  if (size_t len = match_contraction(t, i)) return i + len;
  const CharClass c = t.classes[i];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c == CharClass::kLetter) return run_end(t, i, CharClass::kLetter);
  if (c != CharClass::kNewline && c != CharClass::kNumber && i + 1 < n && t.classes[i + 1] == CharClass::kLetter) {
    return run_end(t, i + 1, CharClass::kLetter);
  }
  // \p{N} or \p{N}{1,3}
  if (c == CharClass::kNumber) {
    size_t end = i + 1;
    while (end < n && end - i < max_digits && t.classes[end] == CharClass::kNumber) ++end;
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t other_start = i;
  if (t.cps[i] == ' ' && i + 1 < n && t.classes[i + 1] == CharClass::kOther) other_start = i + 1;
  if (t.classes[other_start] == CharClass::kOther) {
    const size_t end = run_end(t, other_start, CharClass::kOther);
    return run_end(t, end, CharClass::kNewline);
  }
  // c is whitespace here. \s*[\r\n]+ : ends after the last newline of the whitespace run.
  const size_t ws_end = whitespace_run_end(t, i);
  for (size_t k = ws_end; k > i; --k) {
    if (t.classes[k - 1] == CharClass::kNewline) return k;
  }
  // \s+(?!\S) : the whole run at the end of text, else the run minus its last character (if that leaves any).
  if (ws_end == n) return ws_end;
  if (ws_end - i >= 2) return ws_end - 1;
  // \s+
  return ws_end;
}

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  return std::nullopt;
}

void split_into_pieces(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces) {
  const size_t max_digits = pattern == SplitPattern::kLlama3 ? 3 : 1;
  CodePoints t;
  t.assign(text);
  size_t i = 0;
  while (i < t.size()) {
    const size_t end = match_at(t, i, max_digits);
    pieces.push_back(text.substr(t.offsets[i], t.offsets[end] - t.offsets[i]));
    i = end;
  }
}

}  // namespace qinfer
