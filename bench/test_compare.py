#!/usr/bin/env python3
"""Tests of bench/compare: a planted slowdown is flagged, an unchanged run and a uniformly slower
machine pass; and of bench/table's statistic. Runs the scripts as CI would (a subprocess), on
results written here."""

import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
COMPARE = HERE / "compare"

SHAPES = [(64, 128256), (1, 128256)]
TARGETS = {"max": 1.9e9, "cpu": 14e9, "torch": 2.5e9}
STREAM = 33e9


def results(scale=1.0, slow=None, slow_factor=1.0, stream_scale=None, max_scale=None, old_names=False):
    """A logprobs-bench JSON: every target at every shape, K 0 and 255 of f32 logits, both thread
    counts; with old_names, named as logprobs-bench named them before the k and dtype
    dimensions (levels 0 and 8, no dtype)."""
    benchmarks = []

    def add(name, bps):
        benchmarks.append({"name": name + "/real_time", "run_name": name + "/real_time", "run_type": "iteration",
                           "iterations": 10, "real_time": 1.0, "time_unit": "ms", "bytes_per_second": bps})

    for rows, vocab in SHAPES:
        dtype = "" if old_names else "/dtype:f32"
        for threads in (1, 2):
            add(f"stream_read/rows:{rows}/vocab:{vocab}{dtype}/threads:{threads}",
                STREAM * threads * (scale if stream_scale is None else stream_scale))
            for levels in (0, 8):
                k = f"levels:{levels}" if old_names else f"k:{(1 << levels) - 1}"
                for target, bps in TARGETS.items():
                    name = f"{target}/rows:{rows}/vocab:{vocab}/{k}{dtype}/dist:normal/threads:{threads}"
                    s = max_scale if (target == "max" and max_scale is not None) else scale
                    add(name, bps * threads * s * (slow_factor if name == slow else 1.0))
    return {"context": {"logprobs_set": "test"}, "benchmarks": benchmarks}


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.base = self.write("base.json", results())

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, data):
        path = pathlib.Path(self.dir.name) / name
        path.write_text(json.dumps(data))
        return path

    def compare(self, run, *args):
        return subprocess.run([sys.executable, str(COMPARE), str(run), str(self.base), *args],
                              capture_output=True, text=True)

    SLOW = "cpu/rows:64/vocab:128256/k:255/dtype:f32/dist:normal/threads:2"

    def test_planted_slowdown_is_flagged(self):
        run = self.write("run.json", results(slow=self.SLOW, slow_factor=0.8))
        for anchor in ("stream", "max"):
            with self.subTest(anchor=anchor):
                out = self.compare(run, "--anchor", anchor)
                self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
                flagged = [line for line in out.stdout.splitlines() if "REGRESSION" in line]
                self.assertEqual(len(flagged), 1, out.stdout)
                self.assertIn(self.SLOW, flagged[0])
                self.assertIn("-20.0%", flagged[0])

    def test_report_only_prints_but_passes(self):
        run = self.write("run.json", results(slow=self.SLOW, slow_factor=0.8))
        out = self.compare(run, "--report-only")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("REGRESSION", out.stdout)
        self.assertIn("1 regression(s)", out.stdout)

    def test_slowdown_within_threshold_passes(self):
        run = self.write("run.json", results(slow=self.SLOW, slow_factor=0.95))
        self.assertEqual(self.compare(run).returncode, 0)
        self.assertEqual(self.compare(run, "--threshold", "0.04").returncode, 1)

    def test_unchanged_run_passes(self):
        run = self.write("run.json", results())
        out = self.compare(run)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertNotIn("REGRESSION", out.stdout)
        self.assertIn(f"0 regression(s) among {len(SHAPES) * 2 * 2 * len(TARGETS)} benchmarks", out.stdout)

    def test_uniformly_slower_machine_passes(self):
        run = self.write("run.json", results(scale=0.7))  # everything, anchors included, 30% slower
        for anchor in ("stream", "max"):
            with self.subTest(anchor=anchor):
                out = self.compare(run, "--anchor", anchor)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertIn("-30.0%, not judged", out.stdout)

    def test_slower_backends_on_an_unchanged_machine_are_flagged(self):
        # The anchor is what keeps a real slowdown visible: backends 30% slower, stream unchanged.
        run = self.write("run.json", results(scale=0.7, stream_scale=1.0))
        out = self.compare(run)
        self.assertEqual(out.returncode, 1, out.stdout)

    def test_missing_anchor_is_reported_not_judged(self):
        data = results()
        data["benchmarks"] = [b for b in data["benchmarks"] if not b["name"].startswith("stream_read/rows:1/")]
        run = self.write("run.json", data)
        out = self.compare(run)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("no stream anchor", out.stdout)

    def test_repetitions_use_the_median_or_the_best(self):
        # Three repetitions of every benchmark; one repetition of one benchmark lost its core.
        data = results()
        repeated = []
        for b in data["benchmarks"]:
            for i in range(3):
                slow = b["name"].startswith(self.SLOW) and i == 0
                repeated.append(dict(b, bytes_per_second=b["bytes_per_second"] * (0.5 if slow else 1.0)))
        data["benchmarks"] = repeated
        run = self.write("run.json", data)
        self.assertEqual(self.compare(run).returncode, 0)  # the median ignores one bad repetition
        # A planted slowdown in every repetition is still caught, by either statistic.
        slowed = results(slow=self.SLOW, slow_factor=0.8)
        slowed["benchmarks"] = [b for b in slowed["benchmarks"] for _ in range(3)]
        run = self.write("slow.json", slowed)
        for statistic in ("median", "best"):
            with self.subTest(statistic=statistic):
                self.assertEqual(self.compare(run, "--statistic", statistic).returncode, 1)

    def test_the_table_takes_the_median_or_the_best_repetition(self):
        # Three repetitions of the 64-row cpu benchmark at K = 0, 1 thread, and of its stream_read:
        # cpu reads 14, 7 and 10.5 GB/s, stream_read 33, 33 and 16.5.
        data = results()
        repeated = []
        for b in data["benchmarks"]:
            cpu = b["name"].startswith("cpu/rows:64/vocab:128256/k:0/")
            for factor in (1.0, 0.5, 0.75) if cpu else (1.0, 1.0, 0.5):
                repeated.append(dict(b, bytes_per_second=b["bytes_per_second"] * factor))
        data["benchmarks"] = repeated
        run = self.write("run.json", data)
        for statistic, cell in (("median", "10.50 (32%)"), ("best", "14.00 (42%)")):
            with self.subTest(statistic=statistic):
                out = subprocess.run([sys.executable, str(HERE / "table"), str(run), "--shape", "64x128256",
                                      "--statistic", statistic], capture_output=True, text=True, check=True).stdout
                self.assertIn(f"| cpu | 1 | {cell} |", out)

    def test_a_run_named_before_k_and_dtype_compares_with_a_new_one(self):
        # levels:8 is k:255 of f32 logits: a baseline recorded then still anchors a new run.
        old = self.write("old.json", results(old_names=True))
        out = subprocess.run([sys.executable, str(COMPARE), str(self.write("run.json", results(slow=self.SLOW,
                              slow_factor=0.8))), str(old)], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("1 regression(s) among 24 benchmarks", out.stdout)
        self.assertNotIn("missing from the run", out.stdout)

    def test_nothing_comparable_is_an_error(self):
        run = self.write("run.json", {"benchmarks": []})
        self.assertEqual(self.compare(run).returncode, 2)

    def test_bad_input_is_a_usage_error_in_one_line(self):
        nan_run = results()
        nan_run["benchmarks"][1]["bytes_per_second"] = float("nan")
        zero_anchor = results()
        zero_anchor["benchmarks"][0]["bytes_per_second"] = 0
        unnamed = results()
        unnamed["benchmarks"][2]["name"] = unnamed["benchmarks"][2]["run_name"] = 7
        cases = {"a list": ([results()], []), "benchmarks null": ({"benchmarks": None}, []),
                 "a name that is not text": (unnamed, []), "a NaN bytes/s": (nan_run, []),
                 "a zero anchor": (zero_anchor, []), "threshold nan": (results(), ["--threshold", "nan"]),
                 "threshold 1": (results(), ["--threshold", "1"]), "a bad filter": (results(), ["--filter", "("])}
        for what, (data, args) in cases.items():
            with self.subTest(what=what):
                out = self.compare(self.write("bad.json", data), *args)
                self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
                self.assertNotIn("Traceback", out.stderr)
                self.assertEqual(len([line for line in out.stderr.splitlines() if "error" in line or "cannot" in line]),
                                 1, out.stderr)
        table = subprocess.run([sys.executable, str(HERE / "table"), str(self.write("bad.json", nan_run))],
                               capture_output=True, text=True)
        self.assertEqual(table.returncode, 2, table.stdout + table.stderr)
        self.assertNotIn("Traceback", table.stderr)

    def test_runs_anchored_by_different_stream_read_loops_are_not_compared(self):
        run = results()
        run["context"]["logprobs_stream_read"] = "another-loop"
        path = self.write("run.json", run)
        out = self.compare(path)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("different anchors", out.stderr)
        self.assertEqual(self.compare(path, "--report-only").returncode, 2)
        self.assertEqual(self.compare(path, "--anchor", "max").returncode, 0)

    def test_committed_baselines_compare_with_themselves(self):
        baselines = sorted((HERE / "baselines").glob("*.json"))
        self.assertTrue(baselines, "no committed baseline in bench/baselines")
        for path in baselines:
            with self.subTest(baseline=path.name):
                out = subprocess.run([sys.executable, str(COMPARE), str(path), str(path)], capture_output=True,
                                     text=True)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertIn("0 regression(s)", out.stdout)


if __name__ == "__main__":
    unittest.main()
