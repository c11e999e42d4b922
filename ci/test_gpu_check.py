#!/usr/bin/env python3
"""ci/gpu-check without a GPU (the ctest gpu_check_dry_run): its budget fits 420 s; `run` exits 3
naming the reason and leaves exactly the archive and summary.md (the archive holding the facts);
it refuses an OUT it could overwrite (and `build` a DIR that is not a build); a signal still
leaves both files and ends the step it stopped; find-torch takes LOGPROBS_TORCH_PYTHON first and
only with CUDA; the torch peer fails without torch; and the whole run on stand-ins for the GPU
tools passes, fails on a skipped device test and fails without torch.

    test_gpu_check.py [LOGPROBS_CUDA_BENCH]

With the built logprobs-cuda-bench, the dry run uses its real probe (whose reason here is the
CUDA driver's); without one, a stand-in that fails as it would. Exit 77 (skip) on a machine
where the probe finds a usable device: there `run` is the real check, not a dry run.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "ci" / "gpu-check"
PEER = ROOT / "optimized" / "cuda" / "torch_peer.py"
TOTAL = 420
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def gpu_check(*args, env=None, timeout=120):
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def write(path, text, mode=0o644):
    path.write_text(text)
    path.chmod(mode)


def fake_build(folder, probe_binary):
    """A DIR: MANIFEST.txt and logprobs-cuda-bench (the real one through a link, or a stand-in)."""
    folder.mkdir()
    write(folder / "MANIFEST.txt", "commit 0123abcd (fake build)\n")
    bench = folder / "logprobs-cuda-bench"
    if probe_binary:
        bench.symlink_to(probe_binary)
    else:
        write(bench, "#!/bin/sh\necho 'no CUDA device: cudaGetDeviceCount: planted reason'\nexit 3\n", 0o755)
    return folder


def budget_rows():
    done = gpu_check("budget")
    check(done.returncode == 0, f"budget exits 0, got {done.returncode}: {done.stderr}")
    rows = re.findall(r"^\| (\S[^|]*?) \| (\d+) \|$", done.stdout, re.MULTILINE)
    total = re.search(r"^total (\d+) s of (\d+)$", done.stdout, re.MULTILINE)
    limits = [int(limit) for _, limit in rows]
    check(total and int(total.group(1)) == sum(limits), f"budget's total is the sum of its rows: {done.stdout}")
    check(total and int(total.group(2)) == TOTAL and sum(limits) <= TOTAL, f"the budget fits {TOTAL} s: {done.stdout}")
    check(all(limit > 0 for limit in limits), "every step has a limit")
    names = [name for name, _ in rows]
    check(names[:2] == ["facts", "probe"] and names[2:5] == ["memcheck", "racecheck", "synccheck"],
          f"the facts, the probe, then the three sanitizers: {names}")
    check(names.index("torch-peer") > names.index("cuda-bench") > names.index("campaign") >
          names.index("test_cuda_backend"), f"tests, campaign, benchmarks, torch peer in that order: {names}")
    return [(name, int(limit)) for name, limit in rows if not name.startswith("(")]


def test_dry_run(tmp, probe_binary, budget):
    build = fake_build(tmp / "build", probe_binary)
    out = tmp / "out"
    start = time.monotonic()
    done = gpu_check("run", build, out)
    seconds = time.monotonic() - start
    check(done.returncode == 3, f"run without a GPU exits 3, got {done.returncode}:\n{done.stdout}{done.stderr}")
    check(seconds < 60, f"the dry run took {seconds:.0f} s")
    check(sorted(os.listdir(out)) == ["gpu-check.tar.gz", "summary.md"],
          f"OUT holds exactly the archive and the summary: {sorted(os.listdir(out))}")
    summary = (out / "summary.md").read_text()
    reason = "planted reason" if not probe_binary else "no CUDA device"
    check(summary.startswith("# gpu-check run: NO GPU: ") and reason in summary.splitlines()[0],
          f"the summary's first line names the reason ({reason}):\n{summary}")
    steps = re.findall(r"^\| (\S+) \| (\d+) \| [^|]* \| ([^|]*) \|$", summary, re.MULTILINE)
    check([(name, int(limit)) for name, limit, _ in steps] == budget,
          f"the summary lists every step of the budget with its limit:\n{summary}")
    check(all(result == "not run" for _, _, result in steps[2:]),
          f"nothing ran after the probe:\n{summary}")
    with tarfile.open(out / "gpu-check.tar.gz") as archive:
        names = archive.getnames()
        check({"gpu-check/facts.log", "gpu-check/probe.log", "gpu-check/summary.md"} <= set(names),
              f"the archive lists the facts, the probe and the summary: {names}")
        facts = archive.extractfile("gpu-check/facts.log").read().decode() if "gpu-check/facts.log" in names else ""
    check("glibc: " in facts and "commit 0123abcd" in facts, f"the facts name glibc and the build:\n{facts}")


def test_refusals(tmp):
    build = fake_build(tmp / "build2", None)
    full = tmp / "full"
    full.mkdir()
    write(full / "keep.txt", "an input\n")
    done = gpu_check("run", build, full)
    check(done.returncode == 2 and "not empty" in done.stderr, f"a non-empty OUT is refused: {done.returncode}")
    check(os.listdir(full) == ["keep.txt"] and (full / "keep.txt").read_text() == "an input\n",
          "a refused OUT is left as it was")
    link = tmp / "link"
    link.symlink_to(tmp / "elsewhere", target_is_directory=True)
    done = gpu_check("run", build, link)
    check(done.returncode == 2 and not (tmp / "elsewhere").exists(), "an OUT that is a link is refused")
    check(gpu_check("run", build).returncode == 2, "run without OUT is a usage error")
    done = gpu_check("build", full)
    check(done.returncode == 2 and "not an earlier build" in done.stderr and os.listdir(full) == ["keep.txt"],
          f"build refuses a DIR that is not an earlier build: {done.returncode} {done.stderr}")
    check(gpu_check("build", full, full).returncode == 2, "build takes one DIR")
    check(gpu_check("budget", "extra").returncode == 2, "budget takes no argument")
    empty = tmp / "empty"
    empty.mkdir()
    out = tmp / "out-no-build"
    done = gpu_check("run", empty, out)
    check(done.returncode == 2, f"a DIR without the binaries exits 2, got {done.returncode}")
    check(sorted(os.listdir(out)) == ["gpu-check.tar.gz", "summary.md"] and
          "holds no logprobs-cuda-bench" in (out / "summary.md").read_text(),
          "a DIR without the binaries still leaves the archive and a summary that says so")


def test_signal(tmp):
    """A probe that passes and a test binary that hangs: SIGTERM mid-step still leaves both files."""
    build = tmp / "build3"
    build.mkdir()
    write(build / "logprobs-cuda-bench", "#!/bin/sh\necho 'device 0: a stand-in'\n", 0o755)
    pid_file = tmp / "hung.pid"
    write(build / "test_cuda_backend", f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n", 0o755)
    out = tmp / "out-signal"
    run = subprocess.Popen([str(SCRIPT), "run", str(build), str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not check(pid_file.exists(), "the hung step started"):
        run.kill()
        return
    hung = int(pid_file.read_text())
    run.send_signal(signal.SIGTERM)
    try:
        output, _ = run.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        check(False, "run ends within 30 s of a SIGTERM")
        for pid in (run.pid, hung):
            os.kill(pid, signal.SIGKILL)
        run.communicate()
        return
    check(run.returncode == 4, f"a signal exits 4, got {run.returncode}:\n{output}")
    check(sorted(os.listdir(out)) == ["gpu-check.tar.gz", "summary.md"], f"OUT after a signal: {os.listdir(out)}")
    summary = (out / "summary.md").read_text()
    check(re.search(r"\| (memcheck|test_cuda_backend) \| \d+ \| \d+ \| INTERRUPTED \(SIGTERM\) \|", summary),
          f"the summary names the interrupted step:\n{summary}")
    time.sleep(0.5)
    try:
        os.kill(hung, 0)
        check(False, f"the interrupted step's process {hung} still runs")
        os.kill(hung, signal.SIGKILL)
    except ProcessLookupError:
        pass


GTEST_STAND_IN = """#!/bin/sh
echo "args: $*"
for a in "$@"; do
  case "$a" in
    --gtest_output=json:*) printf '{\\n  "tests": 2,\\n  "testsuites": [%s]\\n}\\n' \\
      "${FAKE_SKIP:+{\\"result\\": \\"SKIPPED\\"\\}}" > "${a#--gtest_output=json:}" ;;
  esac
done
"""
BENCH_JSON = {"copy_bytes_per_second": 4e12,
              "results": [{"rows": 64, "vocab": 128256, "levels": 8, "us": 12.0, "read_bytes_per_second": 2.7e12}]}
BENCH_STAND_IN = f"""#!/bin/sh
[ "$1" = --probe ] && {{ echo 'device 0: a stand-in'; exit 0; }}
[ "$1" = --json ] && echo '{json.dumps(BENCH_JSON)}' > "$2"
"""
PEER_STAND_IN = """import json, sys
json.dump({"results": [{"rows": 64, "vocab": 128256, "levels": 8, "k": 255, "us": 96.0}]}, open(sys.argv[2], "w"))
"""


def stand_in_gpu(tmp):
    """A DIR and a PATH on which every step of `run` finds a stand-in that passes at once."""
    build, tools = tmp / "gpu-build", tmp / "gpu-tools"
    build.mkdir()
    tools.mkdir()
    for name in ("test_cuda_backend", "test_cuda_plan", "test_cuda_kernel_model", "test_hand_cases",
                 "test_properties"):
        write(build / name, GTEST_STAND_IN, 0o755)
    write(build / "logprobs-cuda-bench", BENCH_STAND_IN, 0o755)
    # logprobs-check says 3 MiB (the log is cut to 2), logprobs-bench writes 5 MiB of JSON (left out).
    write(build / "logprobs-check", "#!/bin/sh\necho \"$0 $*\"\nhead -c 3145728 /dev/zero | tr '\\0' x\n", 0o755)
    write(build / "logprobs-bench", "#!/bin/sh\nfor a; do case $a in --benchmark_out=*) "
          "head -c 5242880 /dev/zero > \"${a#*=}\" ;; esac; done\n", 0o755)
    write(build / "torch_peer.py", PEER_STAND_IN)
    write(build / "gpu_summary.py", (ROOT / "optimized" / "cuda" / "gpu_summary.py").read_text())
    write(tools / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA H200 (a stand-in)'\n", 0o755)
    write(tools / "compute-sanitizer", "#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift 2; done\nexec \"$@\"\n",
          0o755)
    python = tmp / "python-gpu"
    write(python, f"#!/bin/sh\nPYTHONPATH={fake_torch(tmp / 'gpu-torch', True)} exec {sys.executable} \"$@\"\n", 0o755)
    return build, {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "LOGPROBS_TORCH_PYTHON": str(python)}


def test_stand_in_gpu(tmp, budget):
    """The whole run on stand-ins: every step passes, the summary joins the two benchmarks, the
    archive holds every step's log; then a skipped device test and a missing torch each fail it."""
    build, env = stand_in_gpu(tmp)
    done = gpu_check("run", build, tmp / "out-gpu", env=env)
    summary = (tmp / "out-gpu" / "summary.md").read_text()
    check(done.returncode == 0 and summary.startswith("# gpu-check run: PASSED"), f"stand-ins pass:\n{summary}")
    results = dict((name, result) for name, _, result in re.findall(r"^\| (\S+) \| (\d+) \| \d+ \| ([^|]*) \|$",
                                                                       summary, re.MULTILINE))
    check(list(results) == [name for name, _ in budget] and set(results.values()) == {"passed"},
          f"every step ran and passed: {results}")
    check("| 64 | 128256 | 255 | 12.00 | 2700 | 67.5% | 96.00 | 8.0x |" in summary, f"the joined table:\n{summary}")
    with tarfile.open(tmp / "out-gpu" / "gpu-check.tar.gz") as archive:
        names = set(archive.getnames())
        log = "gpu-check/memcheck.log"
        memcheck = archive.extractfile(log).read().decode() if log in names else ""
        campaign = archive.extractfile("gpu-check/campaign.log").read() if "gpu-check/campaign.log" in names else b""
        campaign_size, campaign_tail = len(campaign), campaign[(1 << 20) - 10:(1 << 20) + 100].decode()
    check({f"gpu-check/{name}.log" for name, _ in budget} <= names, f"a log per step: {sorted(names)}")
    check({"gpu-check/cuda-bench.json", "gpu-check/torch-peer.json", "gpu-check/memcheck.json"} <= names,
          f"the JSON reports: {sorted(names)}")
    check("gpu-check/logprobs-bench.json" not in names and
          "left out of the archive (over 4194304 bytes): logprobs-bench.json (5242880 bytes)" in summary,
          f"a file over 4 MiB is left out and named:\n{summary}")
    check(0 < campaign_size <= (2 << 20) + 100 and "bytes cut" in campaign_tail,
          f"a log over 2 MiB is cut to 2 MiB: {campaign_size} bytes")
    check("--gtest_filter=GpuCheckSanitizerShapes/*" in memcheck, f"the sanitizer runs the filter: {memcheck}")
    done = gpu_check("run", build, tmp / "out-skip", env={**env, "FAKE_SKIP": "1"})
    summary = (tmp / "out-skip" / "summary.md").read_text()
    check(done.returncode == 1 and "| synccheck | 30 | 0 | FAILED (1 of 2 tests skipped) |" in summary and
          "| test_hand_cases | 15 | 0 | passed |" in summary, f"a skipped device test fails the run:\n{summary}")
    env["LOGPROBS_TORCH_PYTHON"] = str(tmp / "python-without-cuda")
    done = gpu_check("run", build, tmp / "out-no-torch", env=env)
    summary = (tmp / "out-no-torch" / "summary.md").read_text()
    if check(done.returncode == 1, f"no torch fails the run:\n{summary}"):
        check("torch-peer: FAILED (no interpreter imports torch" in summary.splitlines()[0], f"and says so:\n{summary}")


def fake_torch(folder, cuda):
    """A `torch` package that imports (seeing CUDA or not) or, with cuda=None, fails to."""
    (folder / "torch").mkdir(parents=True)
    body = ("raise ImportError('planted: no torch')\n" if cuda is None else
            f"__version__ = 'fake'\nclass cuda:\n    @staticmethod\n    def is_available():\n        return {cuda}\n")
    write(folder / "torch" / "__init__.py", body)
    return folder


def test_torch(tmp):
    for name, cuda in (("no-torch", None), ("no-cuda", False)):
        env = {**os.environ, "PYTHONPATH": str(fake_torch(tmp / name, cuda))}
        done = subprocess.run([sys.executable, str(PEER), "--quick"], capture_output=True, text=True, env=env)
        check(done.returncode == 1 and "FAILED" in done.stdout, f"torch peer with {name}: exit {done.returncode}, "
              f"{done.stdout}{done.stderr}")
    for name, cuda in (("with-cuda", True), ("without-cuda", False)):
        python = tmp / f"python-{name}"
        write(python, f"#!/bin/sh\nPYTHONPATH={fake_torch(tmp / name, cuda)} exec {sys.executable} \"$@\"\n", 0o755)
        done = gpu_check("find-torch", env={**os.environ, "LOGPROBS_TORCH_PYTHON": str(python)})
        chosen = f"use: {python}" in done.stdout
        check(chosen == cuda, f"find-torch {'takes' if cuda else 'passes over'} LOGPROBS_TORCH_PYTHON {name}:\n"
              f"{done.stdout}")
        check(f"{python}: torch fake cuda {cuda}" in done.stdout, f"find-torch reports what it tried:\n{done.stdout}")


def main():
    probe_binary = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
    if probe_binary and not os.access(probe_binary, os.X_OK):
        print(f"FAIL: {probe_binary} is not an executable")
        return 1
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        if probe_binary and gpu_check("probe", fake_build(tmp / "probe", probe_binary)).returncode == 0:
            print("a usable CUDA device is here: ci/gpu-check run is the real check, not a dry run")
            return 77
        budget = budget_rows()
        test_dry_run(tmp, probe_binary, budget)
        test_refusals(tmp)
        test_signal(tmp)
        test_torch(tmp)
        test_stand_in_gpu(tmp, budget)
    print("test_gpu_check:", "FAILED" if failures else "OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
