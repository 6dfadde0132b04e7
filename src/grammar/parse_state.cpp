#include "grammar/parse_state.h"

#include <algorithm>

namespace qinfer::grammar {
namespace {

uint64_t hash_stack(std::span<const int32_t> stack) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ stack.size();
  for (int32_t s : stack) {
    h ^= static_cast<uint32_t>(s);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h;
}

}  // namespace

void StackSet::clear() {
  data_.clear();
  offsets_.resize(1);
  hashes_.clear();
  complete = false;
}

void StackSet::add(std::span<const int32_t> stack) {
  const uint64_t h = hash_stack(stack);
  for (size_t i = 0; i < hashes_.size(); ++i)
    if (hashes_[i] == h && std::equal(stack.begin(), stack.end(), this->stack(i).begin(), this->stack(i).end())) return;
  hashes_.push_back(h);
  data_.insert(data_.end(), stack.begin(), stack.end());
  offsets_.push_back(static_cast<uint32_t>(data_.size()));
}

void Parser::expand(std::span<const int32_t> stack, StackSet& out) {
  scratch_.assign(stack.begin(), stack.end());
  visited_.clear();
  closure(out);
}

// Depth-first over scratch_: a consuming top is kept; each call pushes the callee's start over the return state; an
// accepting top pops. visited_ stops the loops that nullable rules called in a loop would make.
void Parser::closure(StackSet& out) {
  const int32_t top = scratch_.back();
  if (top == kBottom) {
    out.complete = true;
    return;
  }
  const size_t t = static_cast<size_t>(top);
  const bool expands = a_.accepting[t] || a_.call_begin[t] != a_.call_begin[t + 1];
  if (!expands) {  // the common case: a state that only consumes, nothing to expand or loop on
    out.add(scratch_);
    return;
  }
  const uint64_t h = hash_stack(scratch_);
  if (std::find(visited_.begin(), visited_.end(), h) != visited_.end()) return;
  visited_.push_back(h);
  if (a_.consumes[t]) out.add(scratch_);
  for (uint32_t i = a_.call_begin[t]; i < a_.call_begin[t + 1]; ++i) {
    const RuleCall call = a_.calls[i];
    scratch_.back() = call.return_state;
    scratch_.push_back(a_.rule_start[static_cast<size_t>(call.rule)]);
    closure(out);
    scratch_.pop_back();
    scratch_.back() = top;
  }
  if (a_.accepting[t]) {
    scratch_.pop_back();
    closure(out);
    scratch_.push_back(top);
  }
}

bool Parser::step(const StackSet& in, unsigned char byte, StackSet& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const std::span<const int32_t> stack = in.stack(i);
    const int32_t next = a_.step(stack.back(), byte);
    if (next < 0) continue;
    scratch_.assign(stack.begin(), stack.end());
    scratch_.back() = next;
    visited_.clear();
    closure(out);
  }
  return !out.dead();
}

StackSet& Parser::run(const StackSet& in, std::span<const unsigned char> bytes, StackSet& a, StackSet& b) {
  const StackSet* cur = &in;
  StackSet* out = &a;
  for (unsigned char byte : bytes) {
    out = cur == &a ? &b : &a;
    if (!step(*cur, byte, *out)) break;
    cur = out;
  }
  return *out;
}

}  // namespace qinfer::grammar
