#!/usr/bin/env python3
"""The per-target builds of exp_sum.cpp share no symbol with the rest of the program: each object
defines only names in its own namespaces (Eigen renamed per target, and its target's namespace),
so the linker, which keeps one copy of an inline function however many objects define it, can
never give code built for the baseline a copy built for AVX2.

    check_target_symbols.py NM TARGET=OBJECT...      exit 0 pass, 1 fail
"""
import subprocess
import sys

nm, failures = sys.argv[1], []
for spec in sys.argv[2:]:
    target, objects = spec.split("=", 1)
    own = (f"Eigen_{target}::", f"logprobs::exp_sum_targets::{target}::")
    for obj in objects.split(";"):
        listing = subprocess.run([nm, "-C", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
        for line in listing.splitlines():
            parts = line.split(None, 2)
            # A name that mentions the target's namespaces anywhere (a return type printed
            # first, a template argument) is mangled with them: no other object defines it.
            # DW.ref.__gxx_personality_v0 (where exceptions may unwind, as under ASan) is data:
            # the address of the one C++ personality routine, the same in every object.
            name = parts[2] if len(parts) == 3 else ""
            if (len(parts) == 3 and parts[1] not in "tdbrn" and not any(o in name for o in own)
                    and name != "DW.ref.__gxx_personality_v0"):
                failures.append(f"{obj}: {parts[1]} {parts[2]}")
        print(f"{target}: {obj}: checked")
for f in failures:
    print("FAILED: a symbol another object may also define:", f)
sys.exit(1 if failures else 0)
