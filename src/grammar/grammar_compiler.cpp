#include "grammar/grammar_compiler.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_parser.h"
#include "grammar/rule_automaton.h"
#include "util/error.h"

namespace qinfer::grammar {

std::string Constraint::canonical_key() const {
  switch (kind) {
    case Kind::kJsonSchema:
      return "json_schema:" + nlohmann::ordered_json::parse(source).dump();
    case Kind::kJsonObject:
      return "json_object";
    case Kind::kRegex:
      return "regex:" + source;
    case Kind::kChoice:
      return "choice:" + nlohmann::json(choices).dump();
    case Kind::kGrammar:
      return "grammar:" + source;
  }
  return {};
}

Grammar build_grammar(const Constraint& c) {
  switch (c.kind) {
    case Constraint::Kind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(c.source);
      } catch (const std::exception& e) {
        throw Error(ErrorKind::kInvalidArgument, std::string("schema is not valid JSON: ") + e.what());
      }
      return json_schema_grammar(schema);
    }
    case Constraint::Kind::kJsonObject:
      return json_object_grammar();
    case Constraint::Kind::kRegex:
      return parse_regex(c.source);
    case Constraint::Kind::kChoice: {
      if (c.choices.empty()) throw Error(ErrorKind::kInvalidArgument, "the choice list is empty");
      Grammar g;
      std::vector<int32_t> alts;
      for (const std::string& s : c.choices) alts.push_back(g.literal(s));
      g.set_root(g.add_rule("root", g.choice(std::move(alts))));
      return g;
    }
    case Constraint::Kind::kGrammar:
      return parse_gbnf(c.source);
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown constraint kind");
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity) {}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const Constraint& constraint) {
  const std::string key = constraint.canonical_key();
  if (auto hit = lookup(key)) return hit;
  auto compiled = std::make_shared<const CompiledGrammar>(build_automaton(build_grammar(constraint)), vocab_, shared_);
  insert(key, compiled);
  return compiled;
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const std::string& key, const Grammar& grammar) {
  if (auto hit = lookup(key)) return hit;
  auto compiled = std::make_shared<const CompiledGrammar>(build_automaton(grammar), vocab_, shared_);
  insert(key, compiled);
  return compiled;
}

void GrammarCompiler::warm_up() { compile(Constraint{Constraint::Kind::kJsonObject, {}, {}})->precompute(); }

std::shared_ptr<const CompiledGrammar> GrammarCompiler::lookup(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void GrammarCompiler::insert(const std::string& key, std::shared_ptr<const CompiledGrammar> grammar) {
  std::lock_guard lock(mutex_);
  if (index_.count(key)) return;
  lru_.emplace_front(key, std::move(grammar));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

}  // namespace qinfer::grammar
