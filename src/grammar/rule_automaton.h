// The grammar as a pushdown automaton: every rule becomes a deterministic automaton over byte classes and rule calls
// (Thompson construction, subset construction, trimmed to states that can still complete), with all states numbered
// globally. A parse is a set of stacks of these states (grammar/parse_state.h): the top state consumes bytes, a call
// pushes the callee's start state over the return state, a final state may pop.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace qinfer::grammar {

struct RuleCall {
  int32_t rule = 0;
  int32_t return_state = 0;  // where the caller continues once the callee completes
};

struct Automaton {
  int32_t num_classes = 0;                 // bytes split into classes that no rule tells apart
  std::array<uint16_t, 256> byte_class{};  // byte -> class
  std::vector<int32_t> next;               // [num_states, num_classes] target state, -1: no transition
  std::vector<uint8_t> consumes;           // [num_states] 1 when the state has a byte transition
  std::vector<uint8_t> accepting;          // [num_states] 1 when the state's rule may complete here
  std::vector<uint32_t> call_begin;        // [num_states + 1] range of the state's calls in `calls`
  std::vector<RuleCall> calls;
  std::vector<int32_t> rule_start;  // [num_rules] start state of each rule
  std::vector<int32_t> state_rule;  // [num_states] the rule a state belongs to
  std::vector<uint8_t> call_free;   // [num_states] 1 when no state reachable through bytes (itself included) calls
  std::vector<std::string> rule_names;
  int32_t root_rule = 0;

  int32_t num_states() const { return static_cast<int32_t>(state_rule.size()); }
  int32_t step(int32_t state, unsigned char byte) const {
    return next[static_cast<size_t>(state) * static_cast<size_t>(num_classes) + byte_class[byte]];
  }
};

// Builds the automaton of `grammar` from its root rule. Throws Error(kInvalidArgument) naming the rule for a rule
// without a body, left recursion, a grammar that matches nothing, or one too large to compile.
Automaton build_automaton(const Grammar& grammar);

// Steps of build_automaton (rule_automaton_trim.cpp): drops rules that can never complete and states that cannot
// reach completion or are unreachable from the root (throws when the root cannot complete); refuses left recursion
// (a rule that can call itself again before consuming a byte), which would make the parse's closure endless.
void trim_automaton(Automaton& a);
void check_left_recursion(const Automaton& a);
// Fills Automaton::call_free.
void mark_call_free_states(Automaton& a);

}  // namespace qinfer::grammar
