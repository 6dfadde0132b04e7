"""tools/perf_tables.py: the bound arithmetic, the row checks and the marker rewrite, on small results folders."""

import importlib.util
import json
import os
import pathlib
import tempfile
import unittest

SOURCE = pathlib.Path(os.environ.get("QINFER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
spec = importlib.util.spec_from_file_location("perf_tables", SOURCE / "tools" / "perf_tables.py")
perf_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(perf_tables)

CEILINGS = {"ceilings": [
    {"id": "copy", "name": "copy", "value": 4.27e12, "display": "4.27 TB/s", "source": "s"},
    {"id": "bf16_gemm", "name": "gemm", "value": 788e12, "display": "788 TFLOP/s", "source": "s"},
]}
MEASURED = {"id": "b1", "workload": "4B, 1 × 1 K", "status": "measured", "result": "391 tok/s", "value": 391,
            "unit": "tok/s", "bound": {"bytes": 8.2e9, "tokens": 1, "basis": "weights + K/V"}, "target": "≥ 450",
            "commit": "b71fd08", "date": "2026-12-02", "gpu": "H200", "command": "qinfer bench latency", "source": "s"}
DOC = "# t\n\nbefore\n\n<!-- perf-table: ceilings -->\nold\n<!-- /perf-table -->\n\n<!-- perf-table: decode -->\n" \
      "stale\n<!-- /perf-table -->\n\nafter\n"


class PerfTablesTest(unittest.TestCase):
    def folder(self, rows):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        results = pathlib.Path(tmp.name) / "scoreboard"
        results.mkdir()
        (results / "ceilings.json").write_text(json.dumps(CEILINGS), encoding="utf-8")
        (results / "decode.json").write_text(json.dumps({"table": "decode", "rows": rows}), encoding="utf-8")
        doc = pathlib.Path(tmp.name) / "PERFORMANCE.md"
        doc.write_text(DOC, encoding="utf-8")
        return results, doc

    def test_rate_bound_is_tokens_over_bytes_at_the_copy_ceiling(self):
        results, _ = self.folder([MEASURED])
        table = perf_tables.render_tables(results)["decode"]
        # 8.2 GB / 4.27 TB/s = 1.920 ms per token: 521 tok/s, of which 391 is 75 %.
        self.assertIn("| 521 tok/s: 1 tok per 8.20 GB ÷ 4.27 TB/s | 75 % |", table)
        self.assertIn("| b71fd08 · 2026-12-02 · H200 | `qinfer bench latency` |", table)

    def test_bytes_and_flops_add_up_and_a_time_bound_is_shown_as_time(self):
        row = dict(MEASURED, unit="ms", value=2.0, bound={"bytes": 4.27e9, "flops": 788e9, "basis": "b"})
        results, _ = self.folder([row])
        self.assertIn("| 2.00 ms: 4.27 GB ÷ 4.27 TB/s + 788 GFLOP ÷ 788 TFLOP/s | 100 % |",
                      perf_tables.render_tables(results)["decode"])

    def test_a_measured_row_without_its_command_is_refused_by_name(self):
        row = dict(MEASURED)
        del row["command"]
        results, _ = self.folder([row])
        with self.assertRaisesRegex(perf_tables.TableError, "row 'b1': missing field 'command'"):
            perf_tables.render_tables(results)

    def test_a_malformed_date_and_a_repeated_id_are_refused(self):
        results, _ = self.folder([dict(MEASURED, date="2 Dec")])
        with self.assertRaisesRegex(perf_tables.TableError, "date must be YYYY-MM-DD"):
            perf_tables.render_tables(results)
        results, _ = self.folder([MEASURED, MEASURED])
        with self.assertRaisesRegex(perf_tables.TableError, "row id 'b1' is used twice"):
            perf_tables.render_tables(results)

    def test_a_row_not_yet_measured_needs_only_its_target(self):
        results, _ = self.folder([{"id": "awq", "workload": "AWQ", "status": "not yet measured", "target": "≥ 800"}])
        self.assertIn("| AWQ | not yet measured | — | — | — | ≥ 800 | — | — |",
                      perf_tables.render_tables(results)["decode"])

    def test_check_reports_a_stale_table_and_the_rewrite_keeps_the_prose(self):
        results, doc = self.folder([MEASURED])
        args = ["--results", str(results), "--doc", str(doc)]
        self.assertEqual(perf_tables.main(args + ["--check"]), 1)
        self.assertEqual(perf_tables.main(args), 0)
        self.assertEqual(perf_tables.main(args + ["--check"]), 0)
        text = doc.read_text(encoding="utf-8")
        self.assertTrue(text.startswith("# t\n\nbefore\n") and text.endswith("\n\nafter\n"))
        self.assertNotIn("stale", text)

    def test_a_table_without_a_marker_is_an_error(self):
        results, doc = self.folder([MEASURED])
        doc.write_text("no markers\n", encoding="utf-8")
        self.assertEqual(perf_tables.main(["--results", str(results), "--doc", str(doc), "--check"]), 2)

    def test_the_committed_tables_are_current(self):
        self.assertEqual(perf_tables.main(["--check"]), 0)


if __name__ == "__main__":
    unittest.main()
