// Constraints as requests name them, compiled once per distinct constraint: the compiler keeps the most recently used
// compiled grammars by canonical text, so requests with the same schema share one automaton and its token splits.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/token_vocabulary.h"

namespace qinfer::grammar {

struct Constraint {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  std::string source;                // kJsonSchema: schema JSON (key order kept); kRegex; kGrammar: GBNF
  std::vector<std::string> choices;  // kChoice: the exact strings allowed
  std::string canonical_key() const;
};

// The grammar of a constraint. Throws Error(kInvalidArgument) naming the place of a problem.
Grammar build_grammar(const Constraint& constraint);

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 256);
  // Thread-safe. Throws Error(kInvalidArgument) for a constraint that does not compile.
  std::shared_ptr<const CompiledGrammar> compile(const Constraint& constraint);
  // Compiles a grammar built by the caller (tool calls), cached under `key`.
  std::shared_ptr<const CompiledGrammar> compile(const std::string& key, const Grammar& grammar);
  const TokenVocabulary& vocab() const { return *vocab_; }
  // Computes the token splits of what every JSON constraint contains (strings, numbers, any value) now, so that the
  // first requests do not (server start-up).
  void warm_up();

 private:
  std::shared_ptr<const CompiledGrammar> lookup(const std::string& key);
  void insert(const std::string& key, std::shared_ptr<const CompiledGrammar> grammar);

  std::shared_ptr<const TokenVocabulary> vocab_;
  std::shared_ptr<SharedStateTokens> shared_ = std::make_shared<SharedStateTokens>();
  size_t capacity_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace qinfer::grammar
