#!/usr/bin/env python3
"""Writes the tables of docs/PERFORMANCE.md from the measurements in docs/results/scoreboard/*.json.

Each JSON file holds one table: {"table": NAME, "rows": [...]}, and PERFORMANCE.md marks where it goes with
`<!-- perf-table: NAME -->` ... `<!-- /perf-table -->`. ceilings.json holds the measured ceilings that the bounds
divide by. A row is a workload:

  id, workload            unique id, what ran (model shape, batch, lengths, cache dtype)
  status                  "measured" or "not yet measured"
  result, value, unit     the number as shown, and as a number in `unit` (tok/s, TB/s, TFLOP/s, µs, ms, s, MB/s)
  report                  instead of result/value: {"file", "level"} of a `qinfer bench serve` report in docs/results/
  bound                   optional: {"bytes", "flops", "tokens"} (bytes over the copy ceiling plus FLOPs over the bf16
                          GEMM ceiling; a rate bound when tokens is given, a time bound otherwise) or {"ceiling": ID}
                          for rows whose unit is a rate of that ceiling; "basis" says where the counts come from
  baselines               [{"name", "result", "date"[, "command"]}] measured on the same machine kind, or published
  target                  what the open issues ask for, or "—"
  commit, date, gpu       where and when it ran; command: how (every measured row has all four); command_note:
                          what the command does not say (flags not recorded, a second variant)
  source, note            where the number is recorded, and anything a reader of the raw file should know

Usage: tools/perf_tables.py            rewrite the tables in place
       tools/perf_tables.py --check    exit 1 (with a diff) when the committed tables differ from the JSON
Python 3 standard library only.
"""

import argparse
import difflib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = re.compile(r"(<!-- perf-table: ([a-z0-9_]+) -->\n)(.*?)(<!-- /perf-table -->)", re.S)
UNITS = {"tok/s", "TB/s", "TFLOP/s", "µs", "ms", "s", "MB/s"}
SECONDS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class TableError(Exception):
    """A malformed results file: the message names the file, the row and the field."""


def significant(x, digits=3):
    """x rounded to `digits` significant digits, as text with a space between thousands (13 800, 4.27, 0.952)."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(f"{abs(x):e}".split("e")[1]))
    text = f"{round(x, decimals):,.{decimals}f}".replace(",", " ")
    return text


def rate(tokens_per_s):
    """A token rate as the tables write it: 521, 20.3 K, 1.50 K."""
    if tokens_per_s >= 1000:
        return significant(tokens_per_s / 1000) + " K"
    return significant(tokens_per_s)


def amount(x, unit, prefixes):
    for factor, prefix in prefixes:
        if x >= factor:
            return f"{significant(x / factor)} {prefix}{unit}"
    return f"{significant(x)} {unit}"


def byte_text(b):
    return amount(b, "B", [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")])


def flop_text(f):
    return amount(f, "FLOP", [(1e15, "P"), (1e12, "T"), (1e9, "G")])


def time_text(seconds):
    if seconds >= 1:
        return significant(seconds) + " s"
    if seconds >= 1e-3:
        return significant(seconds * 1e3) + " ms"
    return significant(seconds * 1e6) + " µs"


def load_json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise TableError(f"{path}: {e}") from e


def need(row, field, where, kind=str):
    if field not in row:
        raise TableError(f"{where}: missing field '{field}'")
    value = row[field]
    if kind is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise TableError(f"{where}: field '{field}' must be a positive number, got {value!r}")
    elif not isinstance(value, kind) or (kind is str and not value.strip()):
        raise TableError(f"{where}: field '{field}' must be a non-empty {kind.__name__}, got {value!r}")
    return value


def load_ceilings(results):
    path = results / "ceilings.json"
    data = load_json(path)
    ceilings = {}
    for i, c in enumerate(need(data, "ceilings", str(path), list)):
        where = f"{path}: ceiling {i}"
        cid = need(c, "id", where)
        for field in ("name", "display", "source"):
            need(c, field, f"{where} ({cid})")
        ceilings[cid] = c | {"value": need(c, "value", f"{where} ({cid})", float)}
    for required in ("copy", "bf16_gemm"):
        if required not in ceilings:
            raise TableError(f"{path}: no ceiling with id '{required}'")
    return ceilings


def serve_level(results, report, where):
    """output tok/s and TTFT P50 / ITL P99 of one concurrency level of a `qinfer bench serve` report."""
    path = results.parent / need(report, "file", where)
    level_name = need(report, "level", where)
    for level in need(load_json(path), "levels", str(path), list):
        if level.get("name") == level_name:
            tok_s = level["output_throughput"]
            text = (f"{significant(tok_s, 4 if tok_s >= 1000 else 3)} tok/s, TTFT P50 "
                    f"{significant(level['ttft_ms']['p50'])} ms, ITL P99 {significant(level['itl_ms']['p99'])} ms")
            return tok_s, text
    raise TableError(f"{where}: {path.name} has no level '{level_name}'")


def bound_cells(row, unit, value, ceilings, where):
    """(bound, share of bound) for a row: the bound with its arithmetic, and value against it."""
    bound = row.get("bound")
    if bound is None:
        return "—", "—"
    if "ceiling" in bound:
        c = ceilings.get(bound["ceiling"])
        if c is None:
            raise TableError(f"{where}: unknown ceiling '{bound['ceiling']}'")
        share = None
        if value is not None and unit in ("TB/s", "TFLOP/s"):
            share = value * (1e12) / c["value"]
        return c["display"], "—" if share is None else f"{share * 100:.0f} %"
    seconds = 0.0
    parts = []
    if "bytes" in bound:
        b = need(bound, "bytes", where, float)
        seconds += b / ceilings["copy"]["value"]
        parts.append(f"{byte_text(b)} ÷ {ceilings['copy']['display']}")
    if "flops" in bound:
        f = need(bound, "flops", where, float)
        seconds += f / ceilings["bf16_gemm"]["value"]
        parts.append(f"{flop_text(f)} ÷ {ceilings['bf16_gemm']['display']}")
    if not parts:
        raise TableError(f"{where}: a bound needs bytes, flops or a ceiling")
    need(bound, "basis", where)
    arithmetic = " + ".join(parts)
    if "tokens" in bound:
        best = need(bound, "tokens", where, float) / seconds
        share = value / best if value is not None and unit == "tok/s" else None
        tokens = f"{bound['tokens']:,.0f}".replace(",", " ")
        text = f"{rate(best)} tok/s: {tokens} tok per {arithmetic}"
    else:
        best = seconds
        share = best / (value * SECONDS[unit]) if value is not None and unit in SECONDS else None
        text = f"{time_text(best)}: {arithmetic}"
    return text, "—" if share is None else f"{share * 100:.0f} %"


def render_row(row, results, ceilings, where):
    workload = need(row, "workload", where)
    status = need(row, "status", where)
    target = need(row, "target", where)
    if status not in ("measured", "not yet measured"):
        raise TableError(f"{where}: status must be 'measured' or 'not yet measured', got {status!r}")
    value = None
    unit = row.get("unit")
    if status == "measured":
        if "report" in row:
            value, result = serve_level(results, row["report"], where)
            unit = "tok/s"
        else:
            result = need(row, "result", where)
            value = need(row, "value", where, float)
            if need(row, "unit", where) not in UNITS:
                raise TableError(f"{where}: unit must be one of {sorted(UNITS)}, got {unit!r}")
        commit = need(row, "commit", where)
        date = need(row, "date", where)
        if not DATE.match(date):
            raise TableError(f"{where}: date must be YYYY-MM-DD, got {date!r}")
        measured = f"{commit} · {date} · {need(row, 'gpu', where)}"
        command = f"`{need(row, 'command', where)}`"
        if row.get("command_note"):
            command += f" ({row['command_note']})"
        need(row, "source", where)
    else:
        if unit is not None and unit not in UNITS:
            raise TableError(f"{where}: unit must be one of {sorted(UNITS)}, got {unit!r}")
        result = "not yet measured"
        measured = "—"
        command = f"`{row['command']}`" if row.get("command") else "—"
    bound, share = bound_cells(row, unit, value, ceilings, where)
    baselines = []
    for i, b in enumerate(row.get("baselines", [])):
        bwhere = f"{where}, baseline {i}"
        if "report" in b:
            _, text = serve_level(results, b["report"], bwhere)
            btext = ", ".join(text.split(", ")[:2])
        else:
            btext = need(b, "result", bwhere)
        bdate = need(b, "date", bwhere)
        baselines.append(f"{need(b, 'name', bwhere)}: {btext}" + ("" if bdate == "—" else f" ({bdate})"))
    cells = [workload, result, bound, share, "; ".join(baselines) or "—", target, measured, command]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


HEADER = ("| workload | qinfer | bound | of bound | baselines | target | commit · date · GPU | command |\n"
          "|---|---|---|---|---|---|---|---|\n")


def render_ceilings(ceilings):
    lines = ["| ceiling | value | source |", "|---|---|---|"]
    lines += [f"| {c['name']} | {c['display']} | {c['source']} |" for c in ceilings.values()]
    return "\n".join(lines) + "\n"


def render_tables(results):
    ceilings = load_ceilings(results)
    tables = {"ceilings": render_ceilings(ceilings)}
    ids = set()
    for path in sorted(results.glob("*.json")):
        if path.name == "ceilings.json":
            continue
        data = load_json(path)
        name = need(data, "table", str(path))
        if name in tables:
            raise TableError(f"{path}: table '{name}' is defined twice")
        lines = []
        for i, row in enumerate(need(data, "rows", str(path), list)):
            rid = need(row, "id", f"{path}: row {i}")
            if rid in ids:
                raise TableError(f"{path}: row id '{rid}' is used twice")
            ids.add(rid)
            lines.append(render_row(row, results, ceilings, f"{path.name}: row '{rid}'"))
        tables[name] = HEADER + "\n".join(lines) + "\n"
    return tables


def fill(doc_text, tables, doc_name):
    seen = set()

    def replace(match):
        name = match.group(2)
        if name not in tables:
            raise TableError(f"{doc_name}: marker for table '{name}', which no results file defines")
        seen.add(name)
        return match.group(1) + tables[name] + match.group(4)

    text = MARKER.sub(replace, doc_text)
    missing = sorted(set(tables) - seen)
    if missing:
        raise TableError(f"{doc_name}: no marker for table(s) {', '.join(missing)}")
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--results", type=pathlib.Path, default=ROOT / "docs/results/scoreboard")
    parser.add_argument("--doc", type=pathlib.Path, default=ROOT / "docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    try:
        old = args.doc.read_text(encoding="utf-8")
        new = fill(old, render_tables(args.results), str(args.doc))
    except (OSError, TableError) as e:
        print(f"perf_tables: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(args.doc),
                                                       "generated from " + str(args.results)))
            print(f"perf_tables: {args.doc} differs from its results; run tools/perf_tables.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        args.doc.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
