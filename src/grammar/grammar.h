// The grammar every constraint compiles to: named rules over bytes. Each rule's body is an expression tree of byte
// sets, sequences, alternatives, bounded or unbounded repetitions and references to other rules. The front ends
// (GBNF, regex, JSON Schema, choice lists) build it; rule_automaton.h turns it into one automaton per rule.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qinfer::grammar {

using ByteSet = std::bitset<256>;

// An inclusive range of Unicode code points.
struct CodepointRange {
  uint32_t first = 0;
  uint32_t last = 0;
};

struct Expr {
  enum class Kind { kBytes, kSequence, kChoice, kRepeat, kRule };
  Kind kind = Kind::kSequence;
  ByteSet bytes;               // kBytes: one byte out of this set
  std::vector<int32_t> items;  // kSequence / kChoice: expression ids; kRepeat: the one repeated expression
  int32_t min = 0, max = 0;    // kRepeat: bounds, max = -1 for unbounded
  int32_t rule = -1;           // kRule: the referenced rule
};

class Grammar {
 public:
  static constexpr int32_t kUnbounded = -1;

  // Expressions (ids index this grammar's expression table).
  int32_t bytes(const ByteSet& set);
  int32_t byte(unsigned char b);
  int32_t literal(std::string_view text);  // the exact bytes of `text`
  int32_t sequence(std::vector<int32_t> items);
  int32_t choice(std::vector<int32_t> items);  // an empty choice matches nothing
  int32_t empty() { return sequence({}); }
  int32_t repeat(int32_t item, int32_t min, int32_t max);
  int32_t optional(int32_t item) { return repeat(item, 0, 1); }
  int32_t star(int32_t item) { return repeat(item, 0, kUnbounded); }
  int32_t plus(int32_t item) { return repeat(item, 1, kUnbounded); }
  int32_t reference(int32_t rule);
  // One UTF-8 encoded code point out of `ranges` (or, negated, any valid code point outside them).
  int32_t codepoints(std::vector<CodepointRange> ranges, bool negated = false);
  int32_t any_codepoint() { return codepoints({}, true); }

  // Rules. A rule is declared first (so that bodies can refer to it, recursively too) and given its body later.
  int32_t declare_rule(std::string name);
  void set_body(int32_t rule, int32_t expr);
  int32_t add_rule(std::string name, int32_t expr);
  // A fresh rule name derived from `base` (base, base-1, base-2, ...).
  std::string unique_name(std::string_view base) const;
  int32_t find_rule(std::string_view name) const;  // -1 when absent

  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }

  int32_t num_rules() const { return static_cast<int32_t>(rule_names_.size()); }
  const std::string& rule_name(int32_t rule) const { return rule_names_[static_cast<size_t>(rule)]; }
  int32_t rule_body(int32_t rule) const { return rule_bodies_[static_cast<size_t>(rule)]; }
  const Expr& expr(int32_t id) const { return exprs_[static_cast<size_t>(id)]; }
  int32_t num_exprs() const { return static_cast<int32_t>(exprs_.size()); }

 private:
  int32_t add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<std::string> rule_names_;
  std::vector<int32_t> rule_bodies_;  // -1 until set
  std::unordered_map<std::string, int32_t> rule_index_;
  int32_t root_ = -1;
};

// Sorted, merged Unicode scalar value ranges (surrogates removed), complemented when `negated`.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges, bool negated);

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, uint32_t codepoint);

}  // namespace qinfer::grammar
