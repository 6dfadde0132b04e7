#include "grammar/grammar.h"

#include <algorithm>

#include "util/error.h"
#include "util/utf8.h"

namespace qinfer::grammar {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

// Sorted, merged ranges of Unicode scalar values (surrogates removed), complemented when `negated`.
}  // namespace

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges, bool negated) {
  std::vector<CodepointRange> merged;
  std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.first < b.first; });
  for (CodepointRange r : ranges) {
    if (r.first > r.last || r.first > kMaxCodepoint) continue;
    r.last = std::min(r.last, kMaxCodepoint);
    if (!merged.empty() && r.first <= merged.back().last + 1)
      merged.back().last = std::max(merged.back().last, r.last);
    else
      merged.push_back(r);
  }
  if (negated) {
    std::vector<CodepointRange> complement;
    uint32_t next = 0;
    for (CodepointRange r : merged) {
      if (r.first > next) complement.push_back({next, r.first - 1});
      next = r.last + 1;
    }
    if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
    merged = std::move(complement);
  }
  std::vector<CodepointRange> scalars;
  for (CodepointRange r : merged) {
    if (r.last < kSurrogateFirst || r.first > kSurrogateLast) {
      scalars.push_back(r);
      continue;
    }
    if (r.first < kSurrogateFirst) scalars.push_back({r.first, kSurrogateFirst - 1});
    if (r.last > kSurrogateLast) scalars.push_back({kSurrogateLast + 1, r.last});
  }
  return scalars;
}

namespace {

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// The byte ranges of a run of code points of one UTF-8 length whose encodings differ only in a per-position byte
// range: splits [lo, hi] until every continuation position spans whole 6-bit blocks.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t i = 0; i < a.size(); ++i) seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) { utf8::append(out, static_cast<char32_t>(cp)); }

int32_t Grammar::add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<int32_t>(exprs_.size() - 1);
}

int32_t Grammar::bytes(const ByteSet& set) {
  Expr e;
  e.kind = Expr::Kind::kBytes;
  e.bytes = set;
  return add(std::move(e));
}

int32_t Grammar::byte(unsigned char b) {
  ByteSet set;
  set.set(b);
  return bytes(set);
}

int32_t Grammar::literal(std::string_view text) {
  std::vector<int32_t> items;
  for (char c : text) items.push_back(byte(static_cast<unsigned char>(c)));
  return items.size() == 1 ? items[0] : sequence(std::move(items));
}

int32_t Grammar::sequence(std::vector<int32_t> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = Expr::Kind::kSequence;
  e.items = std::move(items);
  return add(std::move(e));
}

int32_t Grammar::choice(std::vector<int32_t> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = Expr::Kind::kChoice;
  e.items = std::move(items);
  return add(std::move(e));
}

int32_t Grammar::repeat(int32_t item, int32_t min, int32_t max) {
  QINFER_CHECK(min >= 0 && (max == kUnbounded || max >= min));
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.items = {item};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

int32_t Grammar::reference(int32_t rule) {
  QINFER_CHECK(rule >= 0 && rule < num_rules());
  Expr e;
  e.kind = Expr::Kind::kRule;
  e.rule = rule;
  return add(std::move(e));
}

int32_t Grammar::codepoints(std::vector<CodepointRange> ranges, bool negated) {
  std::vector<int32_t> alternatives;
  ByteSet ascii;
  for (CodepointRange r : normalize_ranges(std::move(ranges), negated)) {
    // Split at the UTF-8 length boundaries; one-byte code points gather into one byte set.
    for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu, kMaxCodepoint}) {
      if (r.first > bound) continue;
      const uint32_t last = std::min(r.last, bound);
      if (bound == 0x7F) {
        for (uint32_t c = r.first; c <= last; ++c) ascii.set(c);
      } else {
        std::vector<std::vector<std::pair<uint8_t, uint8_t>>> sequences;
        utf8_sequences(r.first, last, sequences);
        for (const auto& seq : sequences) {
          std::vector<int32_t> items;
          for (auto [lo, hi] : seq) {
            ByteSet set;
            for (int b = lo; b <= hi; ++b) set.set(static_cast<size_t>(b));
            items.push_back(bytes(set));
          }
          alternatives.push_back(sequence(std::move(items)));
        }
      }
      if (r.last <= bound) break;
      r.first = bound + 1;
    }
  }
  if (ascii.any()) alternatives.insert(alternatives.begin(), bytes(ascii));
  return choice(std::move(alternatives));
}

int32_t Grammar::declare_rule(std::string name) {
  rule_index_.emplace(name, num_rules());
  rule_names_.push_back(std::move(name));
  rule_bodies_.push_back(-1);
  return num_rules() - 1;
}

void Grammar::set_body(int32_t rule, int32_t expr) { rule_bodies_[static_cast<size_t>(rule)] = expr; }

int32_t Grammar::add_rule(std::string name, int32_t expr) {
  const int32_t rule = declare_rule(std::move(name));
  set_body(rule, expr);
  return rule;
}

std::string Grammar::unique_name(std::string_view base) const {
  std::string name(base);
  for (int i = 1; find_rule(name) >= 0; ++i) name = std::string(base) + "-" + std::to_string(i);
  return name;
}

int32_t Grammar::find_rule(std::string_view name) const {
  auto it = rule_index_.find(std::string(name));
  return it == rule_index_.end() ? -1 : it->second;
}

}  // namespace qinfer::grammar
