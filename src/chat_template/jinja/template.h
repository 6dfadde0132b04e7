// A compiled Jinja template, rendered with jinja2's semantics under the environment transformers builds for chat
// templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
// strftime_now, tojson with ensure_ascii=False).
//
// Known differences from jinja2, none used by the chat templates of Qwen2.5/Qwen3/Llama 3: no include/import/extends
// (refused: chat templates are single files), no *args/**kwargs in calls; str.format without format specs and
// printf-style `%` with %s %r %d %i %f only; integers are 64-bit (overflow is an error); filters that return
// generators in jinja2 (map, select, reject, selectattr, rejectattr, unique, items, and reverse's iterators) compute
// their items eagerly, so an error inside shows up when the filter runs rather than when the generator is consumed,
// and a printed generator shows no address; dict.items()/keys()/values() print as lists; macros see the render's
// variables, not the scope they were defined in, and accept `caller` whether or not they use it; caller() refuses to
// run after its {% call %} block has ended; recursion (macros, loop(...), caller()) stops at 64 levels; a namespace may
// not be stored inside a namespace, and values nest at most 512 levels.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat_template/jinja/interpreter.h"
#include "chat_template/jinja/value.h"

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
