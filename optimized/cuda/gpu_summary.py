#!/usr/bin/env python3
"""Puts logprobs-cuda-bench's and the torch peer's JSON side by side as a Markdown table.

    python3 gpu_summary.py CUDA_BENCH.json [TORCH_PEER.json] > summary.md
"""
import json
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cuda = json.load(open(sys.argv[1]))
    torch = {}
    if len(sys.argv) > 2:
        try:
            for r in json.load(open(sys.argv[2]))["results"]:
                torch[(r["rows"], r["vocab"], r["levels"])] = r["us"]
        except (OSError, ValueError, KeyError) as e:
            print(f"(no torch peer results: {e})\n")
    copy_bw = cuda["copy_bytes_per_second"]
    print(f"device-to-device copy bandwidth: {copy_bw / 1e9:.0f} GB/s (read + written)\n")
    print("| rows | vocab | levels | cuda us | read GB/s | of copy bw | torch us | speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in cuda["results"]:
        key = (r["rows"], r["vocab"], r["levels"])
        t = torch.get(key)
        bw = r["read_bytes_per_second"]
        peer = f"{t:.2f}" if t is not None else "-"
        speedup = f"{t / r['us']:.1f}x" if t is not None else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {r['us']:.2f} | {bw / 1e9:.0f} | {100 * bw / copy_bw:.1f}% "
              f"| {peer} | {speedup} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
