#!/usr/bin/env python3
"""Renders every (template, case) pair of tests/data/chat_templates/cases.json the way Hugging Face does.

Engines:
  transformers  tokenizer.apply_chat_template(..., tokenize=False) on a minimal fast tokenizer that carries the
                template and the template's bos/eos tokens (runs on the GPU test machine, which has transformers).
  transformers_render_function
                transformers.utils.chat_template_utils.render_jinja_template, the function apply_chat_template calls
                (a cross-check that needs no tokenizer object).
  jinja2        a local stand-in: jinja2 configured like transformers' _compile_jinja_template (sandboxed, trim_blocks,
                lstrip_blocks, loopcontrols, raise_exception, strftime_now, tojson with ensure_ascii=False). Secondary
                reference only; the committed references.json must come from the transformers engine.

Output: JSON {"engine", "versions", "renders": [{"template", "case", "text"} or {"template", "case", "error"}]}.
With --snippets: the small single-rule templates of snippets.json, rendered by the jinja2 environment (which agreed
with transformers on every chat case), as {"name", "text"} or {"name", "error"}.
"""

import argparse
import json
import pathlib
import sys
from datetime import datetime

DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "chat_templates"


def case_arguments(spec, template, case):
    tools = spec["tools"] if case.get("tools") else None
    kwargs = dict(template.get("kwargs", {}))
    kwargs.update(case.get("kwargs", {}))
    return case["messages"], tools, case.get("add_generation_prompt", True), kwargs


def make_transformers_renderer():
    import transformers
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    def make_tokenizer(source, template):
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
        tokenizer.chat_template = source
        if template["bos_token"]:
            tokenizer.bos_token = template["bos_token"]
        if template["eos_token"]:
            tokenizer.eos_token = template["eos_token"]
        return tokenizer

    def render(source, template, messages, tools, add_generation_prompt, kwargs):
        try:
            tokenizer = make_tokenizer(source, template)
        except Exception:  # noqa: BLE001 - fall back to the function apply_chat_template calls
            from transformers.utils.chat_template_utils import render_jinja_template
            specials = {k: template[k] for k in ("bos_token", "eos_token") if template[k]}
            rendered, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=source,
                                                add_generation_prompt=add_generation_prompt, **specials, **kwargs)
            return rendered[0]
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                             add_generation_prompt=add_generation_prompt, **kwargs)

    import jinja2
    return render, {"transformers": transformers.__version__, "jinja2": jinja2.__version__}


def make_transformers_function_renderer():
    import jinja2
    import transformers
    from transformers.utils.chat_template_utils import render_jinja_template

    def render(source, template, messages, tools, add_generation_prompt, kwargs):
        specials = {k: template[k] for k in ("bos_token", "eos_token") if template[k]}
        rendered, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=source,
                                            add_generation_prompt=add_generation_prompt, **specials, **kwargs)
        return rendered[0]

    return render, {"transformers": transformers.__version__, "jinja2": jinja2.__version__}


def make_environment():
    """A jinja2 environment configured like transformers' _compile_jinja_template."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        """transformers' {% generation %} block, without the index tracking."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def make_jinja2_renderer():
    import jinja2

    def render(source, template, messages, tools, add_generation_prompt, kwargs):
        specials = {k: template[k] for k in ("bos_token", "eos_token") if template[k]}
        return make_environment().from_string(source).render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
            **specials, **kwargs)

    return render, {"jinja2": jinja2.__version__}


def render_snippets(out_path):
    """Renders tests/data/chat_templates/snippets.json (small templates probing one jinja2 rule each)."""
    import jinja2
    snippets = json.loads((DATA_DIR / "snippets.json").read_text(encoding="utf-8"))
    results = []
    for snippet in snippets:
        entry = {"name": snippet["name"]}
        try:
            entry["text"] = make_environment().from_string(snippet["template"]).render(**snippet["context"])
        except Exception as error:  # noqa: BLE001 - any template failure is a reference outcome
            entry["error"] = f"{type(error).__name__}: {error}"
        results.append(entry)
    result = {"engine": "jinja2", "versions": {"jinja2": jinja2.__version__}, "python": sys.version.split()[0],
              "renders": results}
    pathlib.Path(out_path).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(results)} snippets ({sum(1 for r in results if 'error' in r)} errors) -> {out_path}")


RENDERERS = {
    "transformers": make_transformers_renderer,
    "transformers_render_function": make_transformers_function_renderer,
    "jinja2": make_jinja2_renderer,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=sorted(RENDERERS), default="transformers")
    parser.add_argument("--snippets", action="store_true",
                        help="render snippets.json with the jinja2 environment instead of the chat cases")
    parser.add_argument("--out", required=True, help="output JSON file")
    args = parser.parse_args()
    if args.snippets:
        render_snippets(args.out)
        return

    render, versions = RENDERERS[args.engine]()
    spec = json.loads((DATA_DIR / "cases.json").read_text(encoding="utf-8"))
    renders = []
    for template in spec["templates"]:
        source = (DATA_DIR / template["file"]).read_text(encoding="utf-8")
        for case in spec["cases"]:
            messages, tools, add_generation_prompt, kwargs = case_arguments(spec, template, case)
            entry = {"template": template["name"], "case": case["name"]}
            try:
                entry["text"] = render(source, template, messages, tools, add_generation_prompt, kwargs)
            except Exception as error:  # noqa: BLE001 - any template failure is a reference outcome
                entry["error"] = f"{type(error).__name__}: {error}"
            renders.append(entry)
    result = {"engine": args.engine, "versions": versions, "python": sys.version.split()[0], "renders": renders}
    pathlib.Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    errors = sum(1 for r in renders if "error" in r)
    print(f"{len(renders)} renders ({errors} errors) with {args.engine} {versions} -> {args.out}")


if __name__ == "__main__":
    main()
