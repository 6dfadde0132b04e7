#include "chat_template/jinja/template.h"

#include "chat_template/jinja/lexer.h"
#include "chat_template/jinja/parser.h"

namespace qinfer::jinja {

Template Template::parse(std::string_view source) {
  Template compiled;
  compiled.program_ = std::make_shared<const Body>(parse_template(tokenize(source)));
  return compiled;
}

std::string Template::render(const Value::Dict& variables, const RenderLimits& limits) const {
  Scope root(nullptr);
  for (const auto& [name, value] : variables) {
    if (name.is_string()) root.set(name.str(), value);
  }
  Interpreter interpreter(*program_, limits);
  return interpreter.render(root);
}

}  // namespace qinfer::jinja
