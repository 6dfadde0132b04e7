// A compiled Jinja template, rendered with jinja2's semantics under the environment transformers builds for chat
// templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
// strftime_now, tojson with ensure_ascii=False).
//
// Known differences from jinja2, none used by the chat templates of Qwen2.5/Qwen3/Llama 3: no recursive loops,
// {% call %}, include/import/extends, or *args/**kwargs in calls; str.format without format specs and printf-style
// `%` with %s %r %d %i %f only; integers are 64-bit (overflow is an error); filters that return generators in jinja2
// (items, map, select, unique, reverse, ...) return lists, and dict.items()/keys()/values() print as lists; macros
// see the render's variables, not the scope they were defined in; a namespace may not be stored inside a namespace,
// and values nest at most 512 levels.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/value.h"

namespace qinfer::jinja {

class Template {
 public:
  // Throws Error(kFormat) "template syntax error at line N: ..." for malformed source.
  static Template parse(std::string_view source);

  // Renders with `variables` (string keys) as the template's context. Throws Error(kInvalidArgument)
  // "chat template error at line N: ..." when rendering fails, including raise_exception() in the template.
  // Thread-safe: a Template may be rendered from several threads at once.
  std::string render(const Value::Dict& variables, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Body> program_;
};

}  // namespace qinfer::jinja
