#!/usr/bin/env python3
"""Puts logprobs-cuda-bench's and the torch peer's JSON side by side as a Markdown table.

    python3 gpu_summary.py CUDA_BENCH.json [TORCH_PEER.json] > table.md

Rows are matched by (rows, vocab, K); a result gives K as "k", or as "levels" (K = 2^L - 1).
"""
import json
import sys


def k_of(result):
    if "k" in result:
        return result["k"]
    return (1 << result["levels"]) - 1 if result["levels"] > 0 else 0


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        cuda = load(sys.argv[1])
        copy_bw = cuda["copy_bytes_per_second"]
    except (OSError, ValueError, KeyError) as e:
        print(f"(no logprobs-cuda-bench results: {e})")
        return 1
    torch = {}
    if len(sys.argv) == 3:
        try:
            for r in load(sys.argv[2])["results"]:
                torch[(r["rows"], r["vocab"], k_of(r))] = r["us"]
        except (OSError, ValueError, KeyError) as e:
            print(f"(no torch peer results: {e})\n")
    print(f"device-to-device copy bandwidth: {copy_bw / 1e9:.0f} GB/s (read + written)\n")
    print("| rows | vocab | K | cuda us | read GB/s | of copy bw | torch us | speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in cuda["results"]:
        key = (r["rows"], r["vocab"], k_of(r))
        t = torch.get(key)
        bw = r["read_bytes_per_second"]
        peer = f"{t:.2f}" if t is not None else "-"
        speedup = f"{t / r['us']:.1f}x" if t is not None else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {r['us']:.2f} | {bw / 1e9:.0f} | {100 * bw / copy_bw:.1f}% "
              f"| {peer} | {speedup} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
