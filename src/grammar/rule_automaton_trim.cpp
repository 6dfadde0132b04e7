#include <algorithm>

#include "grammar/rule_automaton.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

// Range of the states of each rule: determinize() appends every rule's states contiguously.
std::vector<int32_t> rule_ends(const Automaton& a) {
  std::vector<int32_t> ends(a.rule_start.size(), 0);
  for (int32_t s = 0; s < a.num_states(); ++s) ends[static_cast<size_t>(a.state_rule[static_cast<size_t>(s)])] = s + 1;
  return ends;
}

template <typename Visit>
void for_each_transition(const Automaton& a, int32_t s, Visit&& visit) {
  const size_t row = static_cast<size_t>(s) * static_cast<size_t>(a.num_classes);
  for (int32_t c = 0; c < a.num_classes; ++c)
    if (const int32_t t = a.next[row + static_cast<size_t>(c)]; t >= 0) visit(t);
}

}  // namespace

void trim_automaton(Automaton& a) {
  const int32_t n = a.num_states(), rules = static_cast<int32_t>(a.rule_start.size());
  const std::vector<int32_t> ends = rule_ends(a);
  // A rule is productive when some path from its start completes through bytes and productive callees.
  std::vector<uint8_t> productive(static_cast<size_t>(rules), 0), seen(static_cast<size_t>(n), 0);
  std::vector<int32_t> work;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < rules; ++r) {
      if (productive[static_cast<size_t>(r)]) continue;
      std::fill(seen.begin() + a.rule_start[static_cast<size_t>(r)], seen.begin() + ends[static_cast<size_t>(r)], 0);
      work = {a.rule_start[static_cast<size_t>(r)]};
      seen[static_cast<size_t>(work[0])] = 1;
      bool completes = false;
      while (!work.empty() && !completes) {
        const int32_t s = work.back();
        work.pop_back();
        completes = a.accepting[static_cast<size_t>(s)];
        auto push = [&](int32_t t) {
          if (!seen[static_cast<size_t>(t)]) seen[static_cast<size_t>(t)] = 1, work.push_back(t);
        };
        for_each_transition(a, s, push);
        for (uint32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i)
          if (productive[static_cast<size_t>(a.calls[i].rule)]) push(a.calls[i].return_state);
      }
      if (completes) productive[static_cast<size_t>(r)] = 1, changed = true;
    }
  }
  if (!productive[static_cast<size_t>(a.root_rule)])
    throw Error(ErrorKind::kInvalidArgument, "the grammar matches nothing: rule '" +
                                                 a.rule_names[static_cast<size_t>(a.root_rule)] +
                                                 "' can never complete");
  // Alive: can reach an accepting state (reverse search over transitions and productive calls).
  std::vector<std::vector<int32_t>> reverse(static_cast<size_t>(n));
  for (int32_t s = 0; s < n; ++s) {
    for_each_transition(a, s, [&](int32_t t) { reverse[static_cast<size_t>(t)].push_back(s); });
    for (uint32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i)
      if (productive[static_cast<size_t>(a.calls[i].rule)])
        reverse[static_cast<size_t>(a.calls[i].return_state)].push_back(s);
  }
  std::vector<uint8_t> alive(static_cast<size_t>(n), 0);
  for (int32_t s = 0; s < n; ++s)
    if (a.accepting[static_cast<size_t>(s)]) alive[static_cast<size_t>(s)] = 1, work.push_back(s);
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    for (int32_t p : reverse[static_cast<size_t>(s)])
      if (!alive[static_cast<size_t>(p)]) alive[static_cast<size_t>(p)] = 1, work.push_back(p);
  }
  // Reachable from the root through alive states.
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  const auto reach = [&](int32_t t) {
    if (alive[static_cast<size_t>(t)] && !keep[static_cast<size_t>(t)])
      keep[static_cast<size_t>(t)] = 1, work.push_back(t);
  };
  reach(a.rule_start[static_cast<size_t>(a.root_rule)]);
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    for_each_transition(a, s, reach);
    for (uint32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i) {
      const RuleCall& c = a.calls[i];
      if (!productive[static_cast<size_t>(c.rule)] || !alive[static_cast<size_t>(c.return_state)]) continue;
      reach(c.return_state);
      reach(a.rule_start[static_cast<size_t>(c.rule)]);
    }
  }
  std::vector<int32_t> renumber(static_cast<size_t>(n), -1);
  int32_t kept = 0;
  for (int32_t s = 0; s < n; ++s)
    if (keep[static_cast<size_t>(s)]) renumber[static_cast<size_t>(s)] = kept++;
  Automaton t;
  t.num_classes = a.num_classes;
  t.byte_class = a.byte_class;
  t.rule_names = a.rule_names;
  t.root_rule = a.root_rule;
  t.rule_start.assign(static_cast<size_t>(rules), -1);
  for (int32_t r = 0; r < rules; ++r)
    if (const int32_t start = a.rule_start[static_cast<size_t>(r)]; start >= 0 && keep[static_cast<size_t>(start)])
      t.rule_start[static_cast<size_t>(r)] = renumber[static_cast<size_t>(start)];
  for (int32_t s = 0; s < n; ++s) {
    if (!keep[static_cast<size_t>(s)]) continue;
    t.state_rule.push_back(a.state_rule[static_cast<size_t>(s)]);
    t.accepting.push_back(a.accepting[static_cast<size_t>(s)]);
    bool consumes = false;
    const size_t row = static_cast<size_t>(s) * static_cast<size_t>(a.num_classes);
    for (int32_t c = 0; c < a.num_classes; ++c) {
      const int32_t target = a.next[row + static_cast<size_t>(c)];
      const int32_t mapped = target >= 0 ? renumber[static_cast<size_t>(target)] : -1;
      t.next.push_back(mapped);
      consumes |= mapped >= 0;
    }
    t.consumes.push_back(consumes);
    t.call_begin.push_back(static_cast<uint32_t>(t.calls.size()));
    for (uint32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i) {
      const RuleCall& c = a.calls[i];
      const int32_t ret = renumber[static_cast<size_t>(c.return_state)];
      if (ret >= 0 && t.rule_start[static_cast<size_t>(c.rule)] >= 0) t.calls.push_back({c.rule, ret});
    }
  }
  t.call_begin.push_back(static_cast<uint32_t>(t.calls.size()));
  a = std::move(t);
}

void check_left_recursion(const Automaton& a) {
  const size_t rules = a.rule_start.size();
  // Nullable rules: complete from their start through calls of nullable rules alone.
  std::vector<uint8_t> nullable(rules, 0);
  std::vector<int32_t> work;
  const auto epsilon_reach = [&](int32_t rule, std::vector<int32_t>& states) {
    states = {a.rule_start[static_cast<size_t>(rule)]};
    for (size_t i = 0; i < states.size(); ++i) {
      const int32_t s = states[i];
      for (uint32_t c = a.call_begin[static_cast<size_t>(s)]; c < a.call_begin[static_cast<size_t>(s) + 1]; ++c)
        if (nullable[static_cast<size_t>(a.calls[c].rule)] &&
            std::find(states.begin(), states.end(), a.calls[c].return_state) == states.end())
          states.push_back(a.calls[c].return_state);
    }
  };
  std::vector<int32_t> states;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules; ++r) {
      if (nullable[r] || a.rule_start[r] < 0) continue;
      epsilon_reach(static_cast<int32_t>(r), states);
      if (std::any_of(states.begin(), states.end(), [&](int32_t s) { return a.accepting[static_cast<size_t>(s)]; }))
        nullable[r] = 1, changed = true;
    }
  }
  // Left-call graph: r -> q when r may call q before consuming a byte; a cycle is left recursion.
  std::vector<std::vector<int32_t>> left(rules);
  for (size_t r = 0; r < rules; ++r) {
    if (a.rule_start[r] < 0) continue;
    epsilon_reach(static_cast<int32_t>(r), states);
    for (int32_t s : states)
      for (uint32_t c = a.call_begin[static_cast<size_t>(s)]; c < a.call_begin[static_cast<size_t>(s) + 1]; ++c)
        left[r].push_back(a.calls[c].rule);
  }
  std::vector<uint8_t> color(rules, 0);  // 0 new, 1 on the path, 2 done
  const auto visit = [&](auto&& self, int32_t r) -> void {
    color[static_cast<size_t>(r)] = 1;
    for (int32_t q : left[static_cast<size_t>(r)]) {
      if (color[static_cast<size_t>(q)] == 1)
        throw Error(ErrorKind::kInvalidArgument, "left recursion through rule '" +
                                                     a.rule_names[static_cast<size_t>(q)] +
                                                     "' (a rule may not call itself before matching a character)");
      if (color[static_cast<size_t>(q)] == 0) self(self, q);
    }
    color[static_cast<size_t>(r)] = 2;
  };
  for (size_t r = 0; r < rules; ++r)
    if (color[r] == 0 && a.rule_start[r] >= 0) visit(visit, static_cast<int32_t>(r));
}

}  // namespace qinfer::grammar
