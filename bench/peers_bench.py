"""The real peers' speed beside our cpu backend, on the same batches in one process: Modular MAX's
own kernel (its engine on the CPU) against the `cpu` backend (OpenMP), called in turn round after
round, each round's time the best of its calls; the ratio is the median of the rounds' ratios.
stream_read (logprobs-bench, the same shape and threads, run right before) gives each a share of
the machine's read bandwidth. T threads: the process is held to T cores (taskset) and
OMP_NUM_THREADS = T, since MAX 26.7's InferenceSession(num_threads=T) aborts on the CPU (it makes
its host device with the default options first).

    bench/peers [--threads 1,2] [--rounds 10] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SHAPES = ((64, 128256), (1, 128256))
LEVELS = (0, 3, 8)  # K = 0, 7, 255


def best_time(call, budget=0.05):
    """The best of the calls made in `budget` seconds (at least 3), in seconds."""
    best, spent, calls = float("inf"), 0.0, 0
    while calls < 3 or spent < budget:
        start = time.perf_counter()
        call()
        took = time.perf_counter() - start
        best, spent, calls = min(best, took), spent + took, calls + 1
    return best


def stream_read_bytes_per_second(bench, rows, vocab, threads):
    name = f"stream_read/rows:{rows}/vocab:{vocab}/dtype:f32/threads:{threads}/real_time"
    out = subprocess.run([bench, "--set=cpu", f"--benchmark_filter=^{name}$", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["benchmarks"][0]["bytes_per_second"]


def worker(threads, rounds, bench):
    """Runs in a process of its own, OMP_NUM_THREADS = threads: one JSON line per configuration."""
    import numpy
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession
    from max.graph import DeviceRef
    from max.pipelines.lib.log_probabilities import log_probabilities_ragged_graph

    import logprobs_harness as lh

    session = InferenceSession(devices=[CPU()])
    rng = numpy.random.default_rng(1)
    for rows, vocab in SHAPES:
        logits = rng.normal(0, 2, size=(rows, vocab)).astype(numpy.float32)
        sampled = rng.integers(0, vocab, size=rows).astype(numpy.uint32)
        batch = lh.Batch(logits, sampled)
        offsets = numpy.arange(rows + 1, dtype=numpy.uint32)
        inputs = [Buffer.from_numpy(a) for a in (logits, numpy.zeros(0, numpy.uint32), sampled, offsets,
                                                 numpy.zeros(rows + 1, numpy.uint32), offsets, offsets)]
        stream = stream_read_bytes_per_second(bench, rows, vocab, threads)
        for levels in LEVELS:
            k = 2**levels - 1
            model = session.load(log_probabilities_ragged_graph(DeviceRef.CPU(), levels=levels))
            real = model.execute(*inputs)
            ours = lh.run("cpu", batch, k)
            assert numpy.array_equal(numpy.asarray(real[1].to_numpy())[:, -1], numpy.asarray(ours.lp_tokens)[:, -1])
            times = {"max": [], "cpu": []}
            for _ in range(rounds):
                times["max"].append(best_time(lambda: model.execute(*inputs)))
                times["cpu"].append(best_time(lambda: lh.run("cpu", batch, k)))
            ratio = statistics.median(m / c for m, c in zip(times["max"], times["cpu"]))
            size = rows * vocab * 4
            print(json.dumps({"rows": rows, "vocab": vocab, "k": k, "threads": threads,
                              "max_us": statistics.median(times["max"]) * 1e6,
                              "cpu_us": statistics.median(times["cpu"]) * 1e6, "cpu_speedup_over_max": ratio,
                              "max_stream_share": size / statistics.median(times["max"]) / stream,
                              "cpu_stream_share": size / statistics.median(times["cpu"]) / stream,
                              "stream_read_gb_s": stream / 1e9}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of calls in turn (default 10)")
    parser.add_argument("--json", help="also write the rows as a JSON list to this file")
    parser.add_argument("--bench", default="build/release/bench/logprobs-bench", help="logprobs-bench, for stream_read")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads {args.threads!r} is not a list of whole numbers")
    if not threads or min(threads) < 1:
        parser.error("--threads needs counts of 1 or more")
    if args.worker:
        worker(args.worker, args.rounds, args.bench)
        return 0
    rows = []
    print(f"{'shape':>12} {'K':>4} {'thr':>3} {'MAX us':>9} {'cpu us':>8} {'cpu speedup':>11} "
          f"{'MAX % read':>10} {'cpu % read':>10}")
    for t in threads:
        environment = dict(os.environ, OMP_NUM_THREADS=str(t))
        cores = ["taskset", "-c", f"0-{t - 1}"] if t < os.cpu_count() else []
        out = subprocess.run(cores + [sys.executable, __file__, "--worker", str(t), "--rounds", str(args.rounds),
                              "--bench", args.bench], env=environment, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return 1
        for line in out.stdout.splitlines():
            r = json.loads(line)
            rows.append(r)
            print(f"{r['rows']:>4}x{r['vocab']:<7} {r['k']:>4} {r['threads']:>3} {r['max_us']:>9.0f} "
                  f"{r['cpu_us']:>8.0f} {r['cpu_speedup_over_max']:>10.2f}x {100 * r['max_stream_share']:>9.1f}% "
                  f"{100 * r['cpu_stream_share']:>9.1f}%")
    if args.json:
        temporary = args.json + ".tmp"
        with open(temporary, "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(temporary, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
