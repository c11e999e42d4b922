#!/usr/bin/env python3
"""The PyTorch peer of the CUDA backend: what a server would otherwise run for logprobs.

For each shape and levels of logprobs-cuda-bench (a decode step: one logit row and one output
row per batch item, N(0, 2) logits), times torch.log_softmax + torch.topk + gather on the GPU
with CUDA events, rotating over enough copies of the logits to exceed the L2 cache, as the CUDA
benchmark does. The logits of a shape are made once and timed at every levels. Writes a JSON
list of {rows, vocab, levels, k, us} (written whole: a temporary file, then a rename).

    python3 torch_peer.py [--quick] [--json FILE]

Exit 1, saying why, when torch does not import or sees no CUDA device: a wrong interpreter is a
failure with no data, never a pass (ci/gpu-check runs this under the interpreter it found).
"""
import argparse
import json
import os
import sys
import tempfile

SHAPES = [(1, 128256), (8, 128256), (64, 128256), (256, 128256), (64, 152064), (64, 262144), (64, 32000)]
LEVELS = [0, 1, 3, 5, 8, 10, 12, 16]
QUICK_SHAPES = [(1, 128256), (64, 128256)]
QUICK_LEVELS = [0, 8]


def make_shape(torch, rows, vocab):
    """The logits of one shape, in enough copies to exceed the L2 cache, and the sampled tokens."""
    copies = max(1, (256 << 20) // (rows * vocab * 4) + 1)
    gen = torch.Generator(device="cuda").manual_seed(42)
    logits = torch.randn((copies, rows, vocab), device="cuda", generator=gen) * 2.0
    sampled = torch.randint(0, vocab, (rows, 1), device="cuda", generator=gen)
    return logits, sampled


def time_levels(torch, logits, sampled, levels):
    copies, rows, vocab = logits.shape
    k = (1 << levels) - 1 if levels > 0 else 0

    def step(x):
        lp = torch.log_softmax(x, dim=-1)
        chosen = lp.gather(1, sampled)
        if k > 0:
            values, tokens = torch.topk(lp, min(k, vocab), dim=-1)
            return values, tokens, chosen
        return chosen

    for i in range(3):
        step(logits[i % copies])
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    step(logits[0])
    stop.record()
    stop.synchronize()
    first_ms = max(start.elapsed_time(stop), 1e-3)
    calls = int(min(2000, max(10, 20.0 / first_ms)))
    start.record()
    for i in range(calls):
        step(logits[i % copies])
    stop.record()
    stop.synchronize()
    us = start.elapsed_time(stop) * 1e3 / calls
    return {"rows": rows, "vocab": vocab, "levels": levels, "k": k, "us": us}


def write_json(path, value):
    """Writes `path` whole or not at all: a new temporary file beside it, then a rename (which
    replaces a link at `path`, never writes through it)."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".torch-peer.", suffix=".part", delete=False) as f:
        try:
            json.dump(value, f, indent=1)
        except BaseException:
            os.unlink(f.name)
            raise
    os.replace(f.name, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch peer: FAILED: torch does not import under {sys.executable} ({e}); nothing timed")
        return 1
    if not torch.cuda.is_available():
        print(f"torch peer: FAILED: torch {torch.__version__} under {sys.executable} sees no CUDA device; "
              "nothing timed")
        return 1
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    levels_list = QUICK_LEVELS if args.quick else LEVELS
    results = []
    print(f"{'rows':>6} {'vocab':>8} {'levels':>6} {'us/call':>10}")
    for rows, vocab in shapes:
        logits, sampled = make_shape(torch, rows, vocab)
        for levels in levels_list:
            r = time_levels(torch, logits, sampled, levels)
            results.append(r)
            print(f"{rows:>6} {vocab:>8} {levels:>6} {r['us']:>10.2f}", flush=True)
        del logits, sampled
        torch.cuda.empty_cache()
    if args.json:
        write_json(args.json, {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
