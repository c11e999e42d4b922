#!/usr/bin/env python3
"""The package under another CPython than Debian's (pyenv's 3.12 or 3.13, without numpy or torch):
the same build imports, judges a case given as array.array buffers (passes, and a planted wrong
value fails under the value rule), draws and shrinks a random case, and writes a file.

    second_interpreter.py     exit 0 when all of it holds, 1 otherwise
"""
import array
import importlib.util
import os
import sys
import tempfile

import logprobs_harness as lh


def main():
    checks = []

    def check(condition, what):
        checks.append(condition)
        print(f"second_interpreter: {'ok  ' if condition else 'FAIL'} {what}")

    print(f"second_interpreter: Python {sys.version.split()[0]} at {sys.executable}; numpy "
          f"{'present' if importlib.util.find_spec('numpy') else 'absent'}; library {lh.library_path}")
    logits = array.array("f", [0.5, 2.0, -1.0, 2.0, 0.0, 1.0, 1.0, 3.0, -2.0, 0.25])
    batch = lh.Batch(logits, array.array("I", [2, 3]), vocab=5, temperatures=array.array("f", [1.0, 0.7]))
    k = 3
    ref = lh.reference(batch, k, ranks=True)
    tokens, values = ref.lp_tokens.tolist(), ref.lp_logits.tolist()
    top_tokens = array.array("I", [t for row in tokens for t in row[:k]])
    top_logprobs = array.array("f", [v for row in values for v in row[:k]])
    sampled = array.array("f", [row[k] for row in values])
    ranks = array.array("I", ref.ranks.tolist())
    report = lh.judge(batch, k, top_tokens=top_tokens, top_logprobs=top_logprobs, sampled_logprobs=sampled,
                      ranks=ranks)
    check(report.ok and report.rows == 2, f"the reference's values in array.array buffers agree ({report.summary()})")

    wrong = array.array("f", top_logprobs)
    wrong[1] += 1e-3
    report = lh.judge(batch, k, top_tokens=top_tokens, top_logprobs=wrong, sampled_logprobs=sampled, ranks=ranks)
    check(not report.ok and set(report.rules) == {"value"} and report.violations[0].slot == 1,
          f"a value off by 1e-3 fails under the value rule ({report.violations[:1]})")

    case = lh.random_batches(5, 1, k=20)[0]
    report = lh.judge(case.batch, 20, lh.run("cpu", case.batch, 20, ranks=case.ranks))
    check(report.ok, f"cpu agrees on a random case ({case.describe()})")
    smallest, steps, _ = lh.find_counterexample(case.seed, 100, lambda b: b.batch_size >= 2, case.options)
    check(smallest is not None and smallest.batch_size == 2, f"B = {case.batch.batch_size} shrinks to the smallest "
          f"failing B = 2 ({steps} steps)")

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "batch.safetensors")
        lh.save_batch(path, batch, k=k)
        check(lh.load_batch(path).k == k, "a batch file written and read back")
    print("second_interpreter:", "OK" if all(checks) else "FAILED")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
