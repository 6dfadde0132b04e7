// A parse in progress: the set of automaton stacks that are still possible after the bytes seen so far. Every stack
// sits on a state that consumes bytes (stacks that could only call or complete are expanded first: the closure);
// `complete` records that a stack emptied, i.e. the whole constraint (or, in the per-state walks of mask_cache.h,
// the rule being walked) completed there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/rule_automaton.h"

namespace qinfer::grammar {

// The state below every stack's first frame: reaching it means the frame above has completed.
constexpr int32_t kBottom = -1;

class StackSet {
 public:
  void clear();
  size_t size() const { return offsets_.size() - 1; }
  bool dead() const { return size() == 0 && !complete; }
  std::span<const int32_t> stack(size_t i) const {
    return {data_.data() + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }
  void add(std::span<const int32_t> stack);  // ignored when already present
  bool complete = false;

 private:
  std::vector<int32_t> data_;
  std::vector<uint32_t> offsets_{0};
  std::vector<uint64_t> hashes_;
};

// Parse operations over one automaton. Keeps scratch buffers: one instance per thread.
class Parser {
 public:
  explicit Parser(const Automaton& automaton) : a_(automaton) {}

  // The closure of `stack` (a frame's state may call rules, or complete and return) added to `out`.
  void expand(std::span<const int32_t> stack, StackSet& out);
  // `out` = every stack of `in` after consuming `byte`, expanded. False when nothing survives.
  bool step(const StackSet& in, unsigned char byte, StackSet& out);
  // Steps through `bytes` (at least one) from `in`, with a and b as ping-pong buffers; returns the final set, a or b
  // (dead as soon as nothing survives).
  StackSet& run(const StackSet& in, std::span<const unsigned char> bytes, StackSet& a, StackSet& b);
  const Automaton& automaton() const { return a_; }

 private:
  void closure(StackSet& out);
  const Automaton& a_;
  std::vector<int32_t> scratch_;
  std::vector<uint64_t> visited_;
};

}  // namespace qinfer::grammar
