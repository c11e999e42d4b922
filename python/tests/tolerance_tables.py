#!/usr/bin/env python3
"""The tables of docs/logprobs-check.md's "The tolerance, measured", from kernel_suite.py:

1. per kernel, the largest share of the tolerance used over every row kind, V and temperature,
   under the v2 rule (sqrt) and the v3 default (calibrated), and the cases it failed;
2. sharpness: per row kind at V = 128256, the smallest uniform shift of every value of a row
   (the reference's values + s) that each rule rejects;
3. cost: the judge's time per row with the calibration and without it (the sqrt rule), in one run.

    PYTHONPATH=build/release/python:python/tests /usr/bin/python3 python/tests/tolerance_tables.py
"""
import time

import numpy as np

import kernel_suite as ks
import logprobs_harness as lh


def kernel_table():
    worst = {kernel: {"sqrt": [0.0, 0], "calibrated": [0.0, 0]} for kernel in ks.HONEST + tuple(ks.FAULTY)}
    cases = 0
    for vocab in ks.VOCABS:
        for kind in ks.ROW_KINDS:
            for temperatures in (False, True):
                batch = ks.make_batch(kind, vocab, temperatures)
                cases += 1
                for kernel in worst:
                    result = kernel(batch, ks.K)
                    for rule in ("sqrt", "calibrated"):
                        report = lh.judge(batch, ks.K, **result, sum_rule=rule, limit=1)
                        entry = worst[kernel][rule]
                        entry[0] = max(entry[0], report.tolerance_used)
                        entry[1] += 0 if report.ok else 1
    print(f"| kernel | kind | largest share used, v2 (sqrt) | failed, v2 | largest share used, v3 (calibrated) "
          f"| failed, v3 |\n| --- | --- | --- | --- | --- | --- |")
    for kernel, rules in worst.items():
        kind = "honest" if kernel in ks.HONEST else "faulty"
        (v2, f2), (v3, f3) = rules["sqrt"], rules["calibrated"]
        print(f"| `{kernel.__name__}` | {kind} | {v2:.3g} | {f2} of {cases} | {v3:.3g} | {f3} of {cases} |")


def smallest_rejected_shift(batch, reference, rule):
    """The smallest s > 0 (to 1%) such that the reference's values + s fail under `rule`."""
    def fails(shift):
        values = np.asarray(reference.lp_logits.tolist(), dtype=np.float32) + np.float32(shift)
        return not lh.judge(batch, ks.K, lp_logits=values, lp_tokens=reference.lp_tokens.tolist(), sum_rule=rule,
                            limit=1).ok
    low, high = 1e-9, 1e-1
    while high / low > 1.01:
        middle = (low * high) ** 0.5
        low, high = (low, middle) if fails(middle) else (middle, high)
    return high


def sharpness_table(vocab=128256):
    print(f"| row kind (V = {vocab}) | smallest shift rejected, v2 (sqrt) | v3 (calibrated) |\n| --- | --- | --- |")
    for kind in ks.ROW_KINDS:
        batch = ks.make_batch(kind, vocab, False)
        reference = lh.reference(batch, ks.K)
        v2, v3 = (smallest_rejected_shift(batch, reference, rule) for rule in ("sqrt", "calibrated"))
        print(f"| {kind} | {v2:.2g} | {v3:.2g} |")


def cost(vocab=128256, rows=256, repeats=3):
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (rows, vocab)).astype(np.float32)
    batch = lh.Batch(logits, list(range(rows)))
    result = lh.reference(batch, ks.K)
    times = {}
    for rule in ("sqrt", "calibrated") * repeats:
        start = time.perf_counter()
        lh.judge(batch, ks.K, result, sum_rule=rule)
        times[rule] = min(times.get(rule, float("inf")), time.perf_counter() - start)
    print(f"judge of {rows} x {vocab} f32 at K = {ks.K} (reference included), best of {repeats}: "
          f"{times['sqrt'] / rows * 1e3:.3f} ms a row without the calibration (sqrt), "
          f"{times['calibrated'] / rows * 1e3:.3f} ms with it (calibrated): "
          f"{times['calibrated'] / times['sqrt']:.2f}x")


if __name__ == "__main__":
    kernel_table()
    print()
    sharpness_table()
    print()
    cost()
