// The split ("pre-tokenizer") regexes of byte-level BPE models, as hand-written matchers over code points.
// Supported patterns (behavior Isolated, so every match and every gap becomes a piece):
//   kQwen2:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ kLlama3: the same with \p{N}{1,3} instead of \p{N}.
// Matching follows Oniguruma (HF tokenizers' regex engine): leftmost-first alternation with backtracking, \s as
// Oniguruma defines it, and case-insensitive contractions where 's also matches U+017F (long s folds to s).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace qinfer {

enum class SplitPattern { kQwen2, kLlama3 };

// The pattern whose regex source is exactly `regex`, or nullopt.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// Splits valid UTF-8 text into pieces (views into text) that concatenate back to text.
void split_into_pieces(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces);

}  // namespace qinfer
