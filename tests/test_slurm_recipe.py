#!/usr/bin/env python3
"""docs/ci.md's Slurm recipe on a real Slurm: munged, slurmctld and slurmd (Debian's slurm-wlm)
started here as root on a one-node cluster of this machine, in a temporary folder, on free local
ports. The recipe's files and commands are taken from the doc as it prints them; only the sizes
change (the array's length and each task's CPUs, in the two #SBATCH lines that set them, and
CASES through the variable the file reads).

1. The array and its afterany merge job, as the doc submits them: the merged table equals the
   unsharded run's (every field but the times).
2. A second array, submitted while the partition is down, loses one task to scancel: its merge
   job exits 2 naming the missing shard; the doc's rerun commands run that shard alone into the
   same folder and merge again, and the merge now completes with the unsharded run's table.

Every daemon started is stopped by its pid whatever happens (finally, the signals ctest and a
terminal send, and PR_SET_PDEATHSIG should this process be killed outright).

    test_slurm_recipe.py LOGPROBS_CHECK DOCS_CI_MD    exit 0 pass, 1 fail, 77 skip (no Slurm here)
"""

import ctypes
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CHECK, DOCS = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2])
TASKS, LOST, CASES, SEED = 4, 2, "8", "3"
DEADLINE = time.monotonic() + 240  # within ctest's TIMEOUT, so that the daemons are stopped here
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")


def fail(what):
    raise AssertionError(what)


def recipe(docs):
    """The two sbatch files (sizes set to ours), the submission commands and the rerun commands."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", docs, re.S)
    files = {}
    for block in blocks:
        m = re.match(r"#!/bin/bash\n# ([\w.-]+\.sbatch):", block)
        if m:
            files[m.group(1)] = block
    if set(files) != {"logprobs-check.sbatch", "logprobs-check-merge.sbatch"}:
        fail(f"docs/ci.md's Slurm recipe has the files {sorted(files)}")
    shard = files["logprobs-check.sbatch"]
    for pattern, size in ((r"^#SBATCH --array=0-\d+$", f"#SBATCH --array=0-{TASKS - 1}"),
                          (r"^#SBATCH --cpus-per-task=\d+$", "#SBATCH --cpus-per-task=1")):
        shard, count = re.subn(pattern, size, shard, flags=re.M)
        if count != 1:
            fail(f"logprobs-check.sbatch has no line {pattern} to size")
    files["logprobs-check.sbatch"] = shard
    submit = [b for b in blocks if b.startswith("array=$(sbatch ")]
    rerun = [b for b in blocks if "$LOST" in b and "sbatch" in b]
    if len(submit) != 1 or len(rerun) != 1:
        fail("docs/ci.md has one block submitting the array and its merge, and one rerunning a lost shard")
    return files, submit[0], rerun[0]


class Cluster:
    """munged, slurmctld and slurmd of a one-node cluster in `root`, stopped by stop()."""

    def __init__(self, root):
        self.root = root
        self.daemons = []  # (name, Popen)
        ports = free_ports(2)
        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        self.node = re.match(r"NodeName=(\S+)", node).group(1)
        (root / "state").mkdir()
        (root / "spool").mkdir()
        self.conf = root / "slurm.conf"
        self.conf.write_text(f"""ClusterName=logprobs-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
# Schedule a batch job when it is submitted (by default Slurm may defer it by up to 3 s).
SchedulerParameters=batch_sched_delay=0
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self):
        self.root.chmod(0o755)  # munged wants its socket's folder searchable by all (clients of any user)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        r = self.root
        self.spawn("munged", ["munged", "--foreground", f"--key-file={key}", f"--socket={r}/munge.socket",
                              f"--pid-file={r}/munged.pid", f"--log-file={r}/munged.log", f"--seed-file={r}/munged.seed"])
        wait_for(lambda: (r / "munge.socket").exists(), "munged's socket", 10)
        self.spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self.spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", str(self.conf)])
        wait_for(lambda: self.slurm(["sinfo", "-h", "-o", "%t"], check=False).strip() == "idle", "an idle node", 30)

    def spawn(self, name, args):
        log = open(self.root / f"{name}.out", "w")
        # The kernel stops the daemon if this process dies without running stop() (SIGKILL).
        libc = ctypes.CDLL(None, use_errno=True)
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                   preexec_fn=lambda: libc.prctl(1, signal.SIGTERM))  # PR_SET_PDEATHSIG
        self.daemons.append((name, process))
        time.sleep(0.2)
        if process.poll() is not None:
            fail(f"{name} exited {process.returncode} at start: {(self.root / f'{name}.out').read_text()[-1500:]}")

    def stop(self):
        if any(name == "slurmctld" and p.poll() is None for name, p in self.daemons):
            self.slurm(["scancel", "--user", "root"], check=False)  # no slurmstepd outlives the test
            wait_for(lambda: not self.slurm(["squeue", "-h"], check=False).strip(), "no jobs left", 15, quiet=True)
        for name, process in reversed(self.daemons):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.daemons.clear()

    def slurm(self, args, check=True):
        result = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            fail(f"{' '.join(args)} exited {result.returncode}: {result.stdout}{result.stderr}")
        return result.stdout

    def shell(self, script, cwd, extra_env):
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env={**self.env, **extra_env},
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            fail(f"the doc's commands exited {result.returncode}: {result.stdout}{result.stderr}")
        return result.stdout

    def wait_jobs(self, ids):
        wait_for(lambda: not self.slurm(["squeue", "-h", "-j", ",".join(ids)], check=False).strip(),
                 f"jobs {ids} to end", DEADLINE - time.monotonic())

    def exit_code(self, job):
        """Job `job`'s exit status (scontrol keeps a finished job for MinJobAge, 300 s)."""
        text = self.slurm(["scontrol", "show", "job", job])
        codes = re.findall(r"\bExitCode=(\d+):(\d+)", text)
        if not codes:
            fail(f"scontrol shows no exit code for job {job}: {text}")
        return max(int(status) for status, _ in codes)  # an array's records, one per task


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def wait_for(condition, what, seconds, quiet=False):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.2)
    if not quiet:
        fail(f"timed out waiting for {what}")


def table(path):
    """A campaign report's verdict: every cell but its time, and the case counts."""
    report = json.loads(pathlib.Path(path).read_text())
    cells = [{k: v for k, v in cell.items() if k != "seconds"} for cell in report["results"]]
    return {"ok": report["ok"], "hand_cases": report["hand_cases"], "random_cases": report["random_cases"],
            "results": cells}


def same_table(path, want):
    """Fails naming the first field where the report at `path` differs from `want`."""
    got = table(path)
    for key in ("ok", "hand_cases", "random_cases"):
        if got[key] != want[key]:
            fail(f"{path}: {key} is {got[key]}, the unsharded run's {want[key]}")
    if len(got["results"]) != len(want["results"]):
        fail(f"{path}: {len(got['results'])} cells, the unsharded run's {len(want['results'])}")
    for a, b in zip(got["results"], want["results"]):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                fail(f"{path}: {a.get('backend')} at K = {a.get('k')}: {key} is {a.get(key)}, the unsharded run's "
                     f"{b.get(key)}")


def submit(cluster, script, variable, cwd, extra_env):
    """Runs the doc's commands: the job id they keep in `variable` (sbatch --parsable's), and the
    one the last sbatch prints."""
    out = cluster.shell(f'{script}\necho "{variable}=${{{variable}%%;*}}"', cwd, extra_env)
    first = re.search(rf"^{variable}=(\d+)$", out, re.M)
    last = re.search(r"^Submitted batch job (\d+)$", out, re.M)
    if not first or not last:
        fail(f"the doc's commands printed no job ids: {out}")
    return first.group(1), last.group(1)


def run(work):
    files, submit_block, rerun_block = recipe(DOCS.read_text())
    jobs = work / "jobs"
    jobs.mkdir()
    for name, text in files.items():
        (jobs / name).write_text(text)
    sizes = {"LOGPROBS_CHECK": str(CHECK), "CASES": CASES, "SEED": SEED}

    cluster = Cluster(work)
    try:
        started = time.monotonic()
        cluster.start()
        print(f"cluster up in {time.monotonic() - started:.1f} s")
        # --time: the default 60 s would let a slow machine cut the unsharded run short.
        unsharded = subprocess.Popen([str(CHECK), "campaign", "--seed", SEED, "--cases", CASES, "--time", "1000",
                                      "--json", str(work / "unsharded.json"), "--out-dir", str(work / "unsharded")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

        # 1. The recipe as written: the array, then its merge after every task.
        array, merge = submit(cluster, submit_block, "array", jobs, sizes)
        cluster.wait_jobs([array, merge])
        if unsharded.wait() != 0:
            fail(f"the unsharded campaign exited {unsharded.returncode}")
        want = table(work / "unsharded.json")
        run_dir = jobs / f"logprobs-check-{array}"
        if cluster.exit_code(array) != 0 or cluster.exit_code(merge) != 0:
            fail(f"array {array} or merge {merge} failed: {(jobs / f'logprobs-check-merge-{merge}.out').read_text()}")
        same_table(run_dir / "merged.json", want)
        print(f"array of {TASKS} and merge: OK, {time.monotonic() - started:.1f} s since the daemons started")

        # 2. A task lost: the array is submitted while nothing can start, so scancel wins the race.
        cluster.slurm(["scontrol", "update", "PartitionName=main", "State=DOWN"])
        array, merge = submit(cluster, submit_block, "array", jobs, sizes)
        cluster.slurm(["scancel", f"{array}_{LOST}"])
        cluster.slurm(["scontrol", "update", "PartitionName=main", "State=UP"])
        cluster.wait_jobs([array, merge])
        merge_out = (jobs / f"logprobs-check-merge-{merge}.out").read_text()
        if cluster.exit_code(merge) != 2 or not re.search(rf"shard {LOST} of {TASKS}\b.*missing", merge_out):
            fail(f"the merge of an array missing task {LOST} exits {cluster.exit_code(merge)}: {merge_out[-800:]}")
        rerun, merge = submit(cluster, rerun_block, "rerun", jobs,
                              {**sizes, "ARRAY": array, "LOST": str(LOST), "SHARDS": str(TASKS)})
        cluster.wait_jobs([rerun, merge])
        merge_out = (jobs / f"logprobs-check-merge-{merge}.out").read_text()
        if cluster.exit_code(rerun) != 0 or cluster.exit_code(merge) != 0:
            fail(f"the rerun of shard {LOST} ({rerun}) or its merge ({merge}) failed: {merge_out[-800:]}")
        same_table(jobs / f"logprobs-check-{array}" / "merged.json", want)
        print(f"lost shard {LOST} named by merge (exit 2), rerun alone, merged: OK; "
              f"{time.monotonic() - started:.1f} s in all")
    finally:
        cluster.stop()


def main():
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        print(f"SKIPPED: Slurm and munge are not installed ({', '.join(missing)} not found; ci/install-deps "
              "installs slurm-wlm and munge)")
        return 77
    if os.geteuid() != 0:
        print("SKIPPED: slurmd and slurmctld run here as root (SlurmUser=root), and this is not root")
        return 77
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _: sys.exit(128 + number))  # unwinds through Cluster.stop()
    with tempfile.TemporaryDirectory(prefix="slurm-") as tmp:
        try:
            run(pathlib.Path(tmp))
        except AssertionError as e:
            print("FAILED:", e)
            for log in ("slurmctld.log", "slurmd.log"):
                path = pathlib.Path(tmp) / log
                if path.exists():
                    print(f"--- the end of {log}\n{path.read_text()[-2000:]}")
            return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
