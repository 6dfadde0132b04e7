#include "grammar/rule_automaton.h"

#include <algorithm>
#include <map>

#include "util/error.h"

namespace qinfer::grammar {
namespace {

constexpr size_t kMaxNfaStates = 4'000'000;
constexpr size_t kMaxDfaStates = 400'000;

[[noreturn]] void too_large() {
  throw Error(ErrorKind::kInvalidArgument,
              "the constraint is too large to compile (over " + std::to_string(kMaxDfaStates) +
                  " automaton states); lower the repetition bounds (maxLength, maxItems, {m,n})");
}

// Byte classes: bytes that every byte set of the grammar treats alike share a class.
std::array<uint16_t, 256> byte_classes(const Grammar& g, int32_t& num_classes, std::vector<ByteSet>& class_sets,
                                       std::vector<int32_t>& expr_class_set) {
  std::array<uint16_t, 256> cls{};
  num_classes = 1;
  std::map<std::string, int32_t> distinct;  // byte set (as a bit string) -> index into the sets
  std::vector<ByteSet> sets;
  const int32_t num_exprs = g.num_exprs();
  expr_class_set.assign(static_cast<size_t>(num_exprs), -1);
  for (int32_t id = 0; id < num_exprs; ++id) {
    const Expr& e = g.expr(id);
    if (e.kind != Expr::Kind::kBytes) continue;
    auto [it, inserted] = distinct.try_emplace(e.bytes.to_string(), static_cast<int32_t>(sets.size()));
    if (inserted) sets.push_back(e.bytes);
    expr_class_set[static_cast<size_t>(id)] = it->second;
  }
  for (const ByteSet& s : sets) {
    std::map<std::pair<uint16_t, bool>, uint16_t> split;
    for (int b = 0; b < 256; ++b) {
      auto [it, inserted] = split.try_emplace({cls[b], s.test(static_cast<size_t>(b))}, split.size());
      cls[b] = it->second;
    }
    num_classes = static_cast<int32_t>(split.size());
  }
  for (const ByteSet& s : sets) {
    ByteSet classes;
    for (int b = 0; b < 256; ++b)
      if (s.test(static_cast<size_t>(b))) classes.set(cls[b]);
    class_sets.push_back(classes);
  }
  return cls;
}

struct NfaEdge {
  enum Kind : uint8_t { kEpsilon, kClasses, kCall } kind;
  int32_t arg;  // kClasses: index into class_sets; kCall: rule
  int32_t target;
};

struct Nfa {
  std::vector<std::vector<NfaEdge>> edges;
  int32_t add_state() {
    if (edges.size() >= kMaxNfaStates) too_large();
    edges.emplace_back();
    return static_cast<int32_t>(edges.size() - 1);
  }
  void link(int32_t from, NfaEdge::Kind kind, int32_t arg, int32_t to) {
    edges[static_cast<size_t>(from)].push_back({kind, arg, to});
  }
};

struct Fragment {
  int32_t start, end;
};

Fragment build_fragment(const Grammar& g, int32_t id, const std::vector<int32_t>& expr_class_set, Nfa& nfa) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case Expr::Kind::kBytes: {
      Fragment f{nfa.add_state(), nfa.add_state()};
      nfa.link(f.start, NfaEdge::kClasses, expr_class_set[static_cast<size_t>(id)], f.end);
      return f;
    }
    case Expr::Kind::kRule: {
      Fragment f{nfa.add_state(), nfa.add_state()};
      nfa.link(f.start, NfaEdge::kCall, e.rule, f.end);
      return f;
    }
    case Expr::Kind::kSequence: {
      const int32_t start = nfa.add_state();
      int32_t end = start;
      for (int32_t item : e.items) {
        const Fragment f = build_fragment(g, item, expr_class_set, nfa);
        nfa.link(end, NfaEdge::kEpsilon, 0, f.start);
        end = f.end;
      }
      return {start, end};
    }
    case Expr::Kind::kChoice: {
      Fragment f{nfa.add_state(), nfa.add_state()};
      for (int32_t item : e.items) {
        const Fragment alt = build_fragment(g, item, expr_class_set, nfa);
        nfa.link(f.start, NfaEdge::kEpsilon, 0, alt.start);
        nfa.link(alt.end, NfaEdge::kEpsilon, 0, f.end);
      }
      return f;
    }
    case Expr::Kind::kRepeat: {
      const int32_t start = nfa.add_state();
      int32_t end = start;
      for (int32_t i = 0; i < e.min; ++i) {
        const Fragment f = build_fragment(g, e.items[0], expr_class_set, nfa);
        nfa.link(end, NfaEdge::kEpsilon, 0, f.start);
        end = f.end;
      }
      if (e.max == Grammar::kUnbounded) {
        const int32_t loop = nfa.add_state();
        const Fragment f = build_fragment(g, e.items[0], expr_class_set, nfa);
        nfa.link(end, NfaEdge::kEpsilon, 0, loop);
        nfa.link(loop, NfaEdge::kEpsilon, 0, f.start);
        nfa.link(f.end, NfaEdge::kEpsilon, 0, loop);
        // A fragment's end has no outgoing edges (others link into it), so the loop exits to a fresh state.
        const int32_t exit = nfa.add_state();
        nfa.link(loop, NfaEdge::kEpsilon, 0, exit);
        return {start, exit};
      }
      // Optional copies nest (x (x (x)?)?)? so that each count has one path.
      std::vector<int32_t> skips;
      for (int32_t i = e.min; i < e.max; ++i) {
        const Fragment f = build_fragment(g, e.items[0], expr_class_set, nfa);
        nfa.link(end, NfaEdge::kEpsilon, 0, f.start);
        skips.push_back(end);
        end = f.end;
      }
      for (int32_t s : skips) nfa.link(s, NfaEdge::kEpsilon, 0, end);
      return {start, end};
    }
  }
  return {};
}

void epsilon_closure(const Nfa& nfa, std::vector<int32_t>& set, std::vector<uint8_t>& seen) {
  std::vector<int32_t> work = set;
  for (int32_t s : set) seen[static_cast<size_t>(s)] = 1;
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    for (const NfaEdge& e : nfa.edges[static_cast<size_t>(s)])
      if (e.kind == NfaEdge::kEpsilon && !seen[static_cast<size_t>(e.target)]) {
        seen[static_cast<size_t>(e.target)] = 1;
        set.push_back(e.target);
        work.push_back(e.target);
      }
  }
  for (int32_t s : set) seen[static_cast<size_t>(s)] = 0;
  std::sort(set.begin(), set.end());
}

// Subset construction of one rule's NFA, appended to the automaton (calls keep callee rule ids).
void determinize(const Nfa& nfa, Fragment f, const std::vector<ByteSet>& class_sets, int32_t rule, Automaton& a) {
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> pending;
  std::vector<uint8_t> seen(nfa.edges.size(), 0);
  const auto state_of = [&](std::vector<int32_t> set) {
    epsilon_closure(nfa, set, seen);
    auto [it, inserted] = ids.try_emplace(set, a.num_states());
    if (inserted) {
      if (static_cast<size_t>(a.num_states()) >= kMaxDfaStates) too_large();
      a.state_rule.push_back(rule);
      a.next.resize(a.next.size() + static_cast<size_t>(a.num_classes), -1);
      pending.push_back(std::move(set));
    }
    return it->second;
  };
  a.rule_start[static_cast<size_t>(rule)] = state_of({f.start});
  std::vector<std::vector<int32_t>> buckets(static_cast<size_t>(a.num_classes));
  std::vector<std::pair<int32_t, std::vector<int32_t>>> call_targets;
  std::vector<std::vector<RuleCall>> state_calls;
  std::vector<uint8_t> accepting;
  for (size_t d = 0; d < pending.size(); ++d) {
    const std::vector<int32_t> set = pending[d];
    const int32_t state = a.rule_start[static_cast<size_t>(rule)] + static_cast<int32_t>(d);
    for (auto& b : buckets) b.clear();
    call_targets.clear();
    bool is_accepting = false;
    for (int32_t s : set) {
      is_accepting |= s == f.end;
      for (const NfaEdge& e : nfa.edges[static_cast<size_t>(s)]) {
        if (e.kind == NfaEdge::kClasses) {
          const ByteSet& classes = class_sets[static_cast<size_t>(e.arg)];
          for (int32_t c = 0; c < a.num_classes; ++c)
            if (classes.test(static_cast<size_t>(c))) buckets[static_cast<size_t>(c)].push_back(e.target);
        } else if (e.kind == NfaEdge::kCall) {
          auto it = std::find_if(call_targets.begin(), call_targets.end(), [&](auto& p) { return p.first == e.arg; });
          if (it == call_targets.end()) it = call_targets.insert(call_targets.end(), {e.arg, {}});
          it->second.push_back(e.target);
        }
      }
    }
    std::map<std::vector<int32_t>, int32_t> by_targets;  // classes with one target set share one lookup
    for (int32_t c = 0; c < a.num_classes; ++c) {
      auto& bucket = buckets[static_cast<size_t>(c)];
      if (bucket.empty()) continue;
      std::sort(bucket.begin(), bucket.end());
      bucket.erase(std::unique(bucket.begin(), bucket.end()), bucket.end());
      auto it = by_targets.find(bucket);
      const int32_t target = it != by_targets.end() ? it->second : by_targets[bucket] = state_of(bucket);
      a.next[static_cast<size_t>(state) * static_cast<size_t>(a.num_classes) + static_cast<size_t>(c)] = target;
    }
    std::vector<RuleCall> calls;
    for (auto& [callee, targets] : call_targets) {
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      calls.push_back({callee, state_of(targets)});
    }
    state_calls.push_back(std::move(calls));
    accepting.push_back(is_accepting);
  }
  for (size_t d = 0; d < state_calls.size(); ++d) {
    a.accepting.push_back(accepting[d]);
    a.call_begin.push_back(static_cast<uint32_t>(a.calls.size()));
    a.calls.insert(a.calls.end(), state_calls[d].begin(), state_calls[d].end());
  }
}

}  // namespace

Automaton build_automaton(const Grammar& g) {
  if (g.root() < 0) throw Error(ErrorKind::kInvalidArgument, "the grammar has no root rule");
  for (int32_t r = 0; r < g.num_rules(); ++r)
    if (g.rule_body(r) < 0)
      throw Error(ErrorKind::kInvalidArgument, "rule '" + g.rule_name(r) + "' is used but not defined");
  Automaton a;
  std::vector<ByteSet> class_sets;
  std::vector<int32_t> expr_class_set;
  a.byte_class = byte_classes(g, a.num_classes, class_sets, expr_class_set);
  a.rule_start.assign(static_cast<size_t>(g.num_rules()), -1);
  for (int32_t r = 0; r < g.num_rules(); ++r) {
    a.rule_names.push_back(g.rule_name(r));
    Nfa nfa;
    const Fragment f = build_fragment(g, g.rule_body(r), expr_class_set, nfa);
    determinize(nfa, f, class_sets, r, a);
  }
  a.call_begin.push_back(static_cast<uint32_t>(a.calls.size()));
  a.root_rule = g.root();
  trim_automaton(a);
  check_left_recursion(a);
  mark_call_free_states(a);
  return a;
}

// Backwards over byte transitions from the states that call: whatever reaches one is not call-free.
void mark_call_free_states(Automaton& a) {
  const size_t n = static_cast<size_t>(a.num_states()), classes = static_cast<size_t>(a.num_classes);
  std::vector<std::vector<int32_t>> sources(n);
  for (size_t s = 0; s < n; ++s)
    for (size_t c = 0; c < classes; ++c)
      if (const int32_t t = a.next[s * classes + c]; t >= 0)
        sources[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  a.call_free.assign(n, 1);
  std::vector<int32_t> todo;
  for (size_t s = 0; s < n; ++s)
    if (a.call_begin[s] != a.call_begin[s + 1]) a.call_free[s] = 0, todo.push_back(static_cast<int32_t>(s));
  while (!todo.empty()) {
    const size_t t = static_cast<size_t>(todo.back());
    todo.pop_back();
    for (int32_t s : sources[t])
      if (a.call_free[static_cast<size_t>(s)]) a.call_free[static_cast<size_t>(s)] = 0, todo.push_back(s);
  }
}

}  // namespace qinfer::grammar
