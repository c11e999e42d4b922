#!/usr/bin/env python3
"""ci/check-layers on small trees: a clean one passes, and each kind of breach fails by name."""
import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).resolve().parent / "check-layers"


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            path = pathlib.Path(root, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        subprocess.run(["git", "init", "-q", root], check=True)
        subprocess.run(["git", "-C", root, "add", "."], check=True)
        done = subprocess.run([sys.executable, str(CHECK), root], capture_output=True, text=True)
        return done.returncode, done.stdout


BASE = {
    "include/logprobs/batch.hpp": "#pragma once\n",
    "src/plan.cpp": '#include "logprobs/batch.hpp"\n',
    "optimized/cpu/kernel.hpp": '#include "logprobs/batch.hpp"\n',
    "optimized/cpu/test_kernel.cpp": '#include "kernel.hpp"\n#include "harness/judge.hpp"\n',
    "optimized/gpu/plan.hpp": "#pragma once\n",
    "harness/judge.hpp": '#include "logprobs/batch.hpp"\n',
    "check/campaign.hpp": '#include "harness/judge.hpp"\n',
    "capi/capi.cpp": '#include "fuzz/generators.hpp"\n#include "logprobs/batch.hpp"\n',
    "capi/test_capi.c": '#include "logprobs/batch.hpp"\n',
    "fuzz/generators.hpp": '#include "harness/judge.hpp"\n',
    "tests/test_all.cpp": '#include "check/campaign.hpp"\n',
}


def expect(files, code, fragment=""):
    got, out = run(files)
    if got != code or fragment not in out:
        print(f"FAIL: want exit {code} with '{fragment}', got {got}:\n{out}")
        return False
    return True


ok = expect(BASE, 0)
ok &= expect({**BASE, "harness/judge.hpp": '#include "check/campaign.hpp"\n'}, 1,
             "harness/judge.hpp: includes check/campaign.hpp from layer application")
ok &= expect({**BASE, "optimized/cpu/kernel.hpp": '#include "optimized/gpu/plan.hpp"\n'}, 1,
             "from optimized/gpu, a folder of its own layer")
ok &= expect({**BASE, "check/campaign.hpp": '#include "tests/test_all.cpp"\n'}, 1, "from layer tests")
ok &= expect({**BASE, "capi/capi.cpp": '#include "check/campaign.hpp"\n'}, 1,
             "capi/capi.cpp: includes check/campaign.hpp from check, a folder of its own layer")
ok &= expect({**BASE, "harness/long.cpp": "//\n" * 401}, 1, "401 lines")
ok &= expect({**BASE, "capi/long.c": "//\n" * 401}, 1, "capi/long.c: 401 lines")
ok &= expect({**BASE, "harness/long.cpp": "// Over 400 lines: a reason.\n" + "//\n" * 401}, 0)
print("test_check_layers:", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
