// Variable scopes of a render, chained innermost to outermost like jinja2's contexts: the render's variables, one
// scope per for-loop iteration, per macro call and per `with` block. `set` writes to the innermost scope.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "chat_template/jinja/value.h"

namespace qinfer::jinja {

// Names are views into the parsed template or the render's variables, both of which outlive the scope.
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}

  const Value* lookup(std::string_view name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_) {
      for (auto it = scope->variables_.rbegin(); it != scope->variables_.rend(); ++it) {
        if (it->first == name) return &it->second;
      }
    }
    return nullptr;
  }

  void set(std::string_view name, Value value) {
    for (auto& [key, existing] : variables_) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    variables_.emplace_back(name, std::move(value));
  }

  const Scope* parent() const { return parent_; }

 private:
  const Scope* parent_;
  std::vector<std::pair<std::string_view, Value>> variables_;
};

}  // namespace qinfer::jinja
