"""Reading logprobs-bench results (Google Benchmark JSON) and the regression rule, shared by
bench/compare and bench/dashboard (so the dashboard marks exactly what the gate flags). Python 3
standard library only.

A benchmark name is `<target>/key:value/...`, e.g. `cpu/rows:64/vocab:128256/k:7/dtype:f32/
dist:normal/threads:2` or `stream_read/rows:64/vocab:128256/dtype:f32/threads:2`. Google Benchmark
appends segments of its own (`/real_time`, `/min_time:0.100`, and aggregate suffixes); those are
dropped, so the key of a benchmark does not depend on how long it was run. Names from before the
k and dtype dimensions (`levels:L`, f32 logits only) read as today's (`k:2^L-1`, `dtype:f32`), so
an older run, such as a committed baseline, compares with a new one.
"""

import json
import math
import re
import statistics

# Segments Google Benchmark adds to a name; they say how it was timed, not what was timed.
_TIMING_KEYS = {"min_time", "min_warmup_time", "iterations", "repeats", "threads_gb"}


def parse_name(name):
    """Returns (target, {key: value}) for a benchmark name; values stay strings."""
    parts = name.split("/")
    dims = {}
    for part in parts[1:]:
        if ":" not in part:
            continue  # real_time, manual_time, process_time
        key, value = part.split(":", 1)
        if key not in _TIMING_KEYS:
            dims[key] = value
    return parts[0], dims


def normalized(dims):
    """`dims` in today's names: levels L becomes k = 2^L - 1, and a shape without a dtype is f32
    (logprobs-bench timed f32 logits only before it had the dimension)."""
    dims = dict(dims)
    if "levels" in dims and "k" not in dims and dims["levels"].isdigit():
        dims["k"] = str((1 << int(dims.pop("levels"))) - 1)
    if "rows" in dims and "dtype" not in dims:
        dims["dtype"] = "f32"
    return dims


def canonical(target, dims):
    order = ["rows", "vocab", "levels", "k", "dtype", "dist", "threads"]
    keys = [k for k in order if k in dims] + sorted(k for k in dims if k not in order)
    return "/".join([target] + [f"{k}:{dims[k]}" for k in keys])


class Run:
    """One run: bytes/s per canonical benchmark key, the context, and the parsed dimensions."""

    def __init__(self, data, source="<run>", statistic="median"):
        """statistic: how repetitions (--benchmark_repetitions) become one figure: `median`, or
        `best` (the highest bytes/s, steadier on a shared machine where a repetition can lose its
        core to another process)."""
        self.source = source
        if not isinstance(data, dict):
            raise ValueError(f"{source}: not a Google Benchmark report (a JSON {type(data).__name__}, not an object)")
        self.context = data.get("context", {})
        benchmarks = data.get("benchmarks", [])
        if not isinstance(self.context, dict) or not isinstance(benchmarks, list):
            raise ValueError(f"{source}: \"context\" must be an object and \"benchmarks\" a list")
        samples = {}
        on_cpu = {}
        aggregated = {}
        self.dims = {}
        self.errors = {}
        for b in benchmarks:
            name = b.get("run_name", b.get("name")) if isinstance(b, dict) else None
            if not isinstance(name, str):
                raise ValueError(f"{source}: a benchmark without a name: {json.dumps(b)[:80]}")
            target, dims = parse_name(name)
            dims = normalized(dims)
            key = canonical(target, dims)
            self.dims[key] = (target, dims)
            if b.get("error_occurred"):
                self.errors[key] = b.get("error_message", "error")
                continue
            if "bytes_per_second" not in b:
                continue
            if b.get("run_type") == "aggregate":
                # With --benchmark_repetitions, the median is the figure to trust.
                if statistic == "median" and b.get("aggregate_name") == "median":
                    aggregated[key] = _throughput(source, name, b["bytes_per_second"])
            else:
                samples.setdefault(key, []).append(_throughput(source, name, b["bytes_per_second"]))
                if b.get("cpu_time"):
                    # Bytes per second of the main thread's CPU time: on a shared machine, what a
                    # one-thread benchmark reads while it holds a core (meaningless with threads).
                    on_cpu.setdefault(key, []).append(float(b["bytes_per_second"]) * b["real_time"] / b["cpu_time"])
        pick = max if statistic == "best" else statistics.median
        self.bytes_per_second = {k: pick(v) for k, v in samples.items()}
        self.bytes_per_second.update(aggregated)
        self.bytes_per_cpu_second = {k: pick(v) for k, v in on_cpu.items()}
        for key in list(self.dims):
            if key not in self.bytes_per_second and key not in self.errors:
                del self.dims[key]

    @classmethod
    def load(cls, path, statistic="median"):
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f), source=str(path), statistic=statistic)

    def target(self, key):
        return self.dims[key][0]

    def stream_anchor_key(self, key):
        """The stream_read benchmark of the same size (shape and dtype) and thread count as `key`."""
        _, dims = self.dims[key]
        return canonical("stream_read", {k: dims[k] for k in ("rows", "vocab", "dtype", "threads") if k in dims})

    def max_anchor_key(self, key):
        """The `max` backend at the same shape, levels, distribution and threads as `key`."""
        return canonical("max", self.dims[key][1])

    def anchor_key(self, key, anchor):
        return self.stream_anchor_key(key) if anchor == "stream" else self.max_anchor_key(key)

    def read_bw_fraction(self, key):
        """bytes/s over the same-size, same-threads stream_read bytes/s of this run, or None."""
        anchor = self.bytes_per_second.get(self.stream_anchor_key(key))
        value = self.bytes_per_second.get(key)
        return None if anchor is None or value is None else value / anchor


def _throughput(source, name, value):
    """A bytes/s figure: a positive finite number, or the report is refused (a NaN or a zero would
    pass the gate, or divide by zero as an anchor)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{source}: {name}: bytes_per_second {value!r} is not a positive finite number")
    return float(value)


# The loop that timed a run's stream_read, from its context (logprobs-bench's kStreamReadLoop);
# runs recorded before the context said so were timed by the first one.
FIRST_STREAM_READ_LOOP = "sse2-one-accumulator"


def stream_read_loop(run):
    return run.context.get("logprobs_stream_read", FIRST_STREAM_READ_LOOP)


def same_anchor(run, base, anchor):
    """Whether `anchor` means the same in both runs: the max port always; stream_read only when
    one loop timed both (fractions of two loops would compare the loops, not the backends)."""
    return anchor != "stream" or stream_read_loop(run) == stream_read_loop(base)


def compare(run, base, anchor, threshold, name_filter=None):
    """The regression gate's rule: each benchmark of `base` divided by its anchor in the same run
    (`stream`: the same-size stream_read; `max`: the max port at the same key), in `run` and in
    `base`; a fall of that ratio by more than `threshold` is a regression. Returns (rows,
    regressions, notes); rows are dicts with key, base_gbs, run_gbs, base_norm, run_norm, change,
    regressed."""
    rows, regressions, notes = [], [], []
    for key in sorted(base.bytes_per_second):
        if name_filter and not re.search(name_filter, key):
            continue
        target = base.target(key)
        if target == "stream_read" or (anchor == "max" and target == "max"):
            continue  # anchors: reported as the machine's change, never judged
        if key not in run.bytes_per_second:
            notes.append(f"missing from the run: {key}" + (f" ({run.errors[key]})" if key in run.errors else ""))
            continue
        base_anchor = base.bytes_per_second.get(base.anchor_key(key, anchor))
        run_anchor = run.bytes_per_second.get(run.anchor_key(key, anchor))
        if base_anchor is None or run_anchor is None:
            notes.append(f"no {anchor} anchor for {key} in the {'baseline' if base_anchor is None else 'run'}")
            continue
        base_norm = base.bytes_per_second[key] / base_anchor
        run_norm = run.bytes_per_second[key] / run_anchor
        change = run_norm / base_norm - 1.0
        row = {
            "key": key,
            "base_gbs": base.bytes_per_second[key] / 1e9,
            "run_gbs": run.bytes_per_second[key] / 1e9,
            "base_norm": base_norm,
            "run_norm": run_norm,
            "change": change,
            "regressed": change < -threshold,
        }
        rows.append(row)
        if row["regressed"]:
            regressions.append(row)
    for key in sorted(run.bytes_per_second):
        if key not in base.bytes_per_second and (not name_filter or re.search(name_filter, key)):
            notes.append(f"new in the run (no baseline): {key}")
    return rows, regressions, notes
