// Decimal integers within bounds as a grammar expression: the range is split into runs whose digits are each a
// range (e.g. [17, 243] = 1[7-9] | [2-9]\d | 1\d\d | 2[0-3]\d | 24[0-3]).
#include <string>

#include "grammar/json_schema_converter.h"

namespace qinfer::grammar {
namespace {

ByteSet digit_range(char lo, char hi) {
  ByteSet set;
  for (char c = lo; c <= hi; ++c) set.set(static_cast<unsigned char>(c));
  return set;
}

// Digit strings of equal length between a and b (inclusive), leading zeros allowed.
int32_t same_length(Grammar& g, const std::string& a, const std::string& b) {
  if (a.size() == 1) return g.bytes(digit_range(a[0], b[0]));
  const std::string a_rest = a.substr(1), b_rest = b.substr(1);
  if (a[0] == b[0]) return g.sequence({g.byte(static_cast<unsigned char>(a[0])), same_length(g, a_rest, b_rest)});
  const std::string nines(a_rest.size(), '9'), zeros(a_rest.size(), '0');
  std::vector<int32_t> alts;
  alts.push_back(g.sequence({g.byte(static_cast<unsigned char>(a[0])), same_length(g, a_rest, nines)}));
  if (b[0] - a[0] > 1)
    alts.push_back(g.sequence({g.bytes(digit_range(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1))),
                               g.repeat(g.bytes(digit_range('0', '9')), static_cast<int32_t>(a_rest.size()),
                                        static_cast<int32_t>(a_rest.size()))}));
  alts.push_back(g.sequence({g.byte(static_cast<unsigned char>(b[0])), same_length(g, zeros, b_rest)}));
  return g.choice(std::move(alts));
}

// Canonical non-negative integers in [lo, hi]; hi < 0: unbounded.
int32_t non_negative(Grammar& g, int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo);
  std::vector<int32_t> alts;
  const auto all_of_length = [&](size_t len) {
    if (len == 1) return g.bytes(digit_range('0', '9'));
    return g.sequence(
        {g.bytes(digit_range('1', '9')),
         g.repeat(g.bytes(digit_range('0', '9')), static_cast<int32_t>(len - 1), static_cast<int32_t>(len - 1))});
  };
  if (hi < 0) {
    alts.push_back(same_length(g, a, std::string(a.size(), '9')));
    alts.push_back(
        g.sequence({g.bytes(digit_range('1', '9')),
                    g.repeat(g.bytes(digit_range('0', '9')), static_cast<int32_t>(a.size()), Grammar::kUnbounded)}));
    return g.choice(std::move(alts));
  }
  const std::string b = std::to_string(hi);
  if (a.size() == b.size()) return same_length(g, a, b);
  alts.push_back(same_length(g, a, std::string(a.size(), '9')));
  for (size_t len = a.size() + 1; len < b.size(); ++len) alts.push_back(all_of_length(len));
  std::string lowest(b.size(), '0');  // 10...0, the least number of b's length
  lowest[0] = '1';
  alts.push_back(same_length(g, lowest, b));
  return g.choice(std::move(alts));
}

}  // namespace

int32_t integer_range(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<int32_t> alts;
  // Negative part: "-" then magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t min_magnitude = hi && *hi < 0 ? -*hi : 1;
    const int64_t max_magnitude = lo ? -*lo : -1;
    alts.push_back(g.sequence({g.byte('-'), non_negative(g, min_magnitude, max_magnitude)}));
  }
  if (!hi || *hi >= 0) alts.push_back(non_negative(g, lo && *lo > 0 ? *lo : 0, hi ? *hi : -1));
  return g.choice(std::move(alts));
}

}  // namespace qinfer::grammar
