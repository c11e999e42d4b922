#!/usr/bin/env python3
"""The recipes of docs/ci.md still work: the Slurm array and merge scripts and the Kubernetes
Indexed Job's shell parts run here, as those engines would run them (their variables set by
hand, a few cases); the GitHub Actions and GitLab files have the structure the recipes rely on;
every option the recipes give logprobs-check exists.

  test_ci_recipes.py LOGPROBS_CHECK DOCS_CI_MD     exit 0 pass, 1 fail, 77 skip (no PyYAML)
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print(f"SKIPPED: PyYAML is not importable by {sys.executable}")
    sys.exit(77)

CHECK, DOCS = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2])
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what)
    return condition


def recipes():
    """{file name: text} of every fenced block whose first comment line names a file."""
    found = {}
    for block in re.findall(r"```[a-z]*\n(.*?)```", DOCS.read_text(), re.S):
        for line in block.splitlines()[:2]:
            m = re.match(r"# ([\w./-]+\.(?:yml|yaml|sbatch))\b", line)
            if m:
                found[m.group(1)] = block
    return found


def run(args, env, timeout=300):
    try:
        result = subprocess.run(args, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"
    return result.returncode, result.stdout + result.stderr


def merged_cases(path):
    if not pathlib.Path(path).exists():
        return None
    report = json.loads(pathlib.Path(path).read_text())
    return report["random_cases"], report["shard"]["count"], report["ok"]


def test_slurm(files, work):
    array, merge = work / "logprobs-check.sbatch", work / "logprobs-check-merge.sbatch"
    array.write_text(files["logprobs-check.sbatch"])
    merge.write_text(files["logprobs-check-merge.sbatch"])
    spec = re.search(r"#SBATCH --array=(\d+)-(\d+)$", files["logprobs-check.sbatch"], re.M)
    check(spec and spec.group(1) == "0", "the Slurm array counts its tasks from 0 without gaps")
    run_dir = work / "slurm-run"
    common = {"LOGPROBS_CHECK": str(CHECK), "CASES": "9", "SEED": "5", "RUN_DIR": str(run_dir),
              "SLURM_ARRAY_JOB_ID": "4242", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0",
              "SLURM_ARRAY_TASK_MAX": "2", "SLURM_CPUS_PER_TASK": "1"}
    for task in range(3):
        status, out = run(["bash", str(array)], {**common, "SLURM_ARRAY_TASK_ID": str(task)})
        check(status == 0, f"Slurm array task {task} exits 0: {out[-800:]}")
    status, out = run(["bash", str(merge)], {"LOGPROBS_CHECK": str(CHECK), "RUN_DIR": str(run_dir)})
    check(status == 0 and "3 shards of seed 5" in out, f"the Slurm merge step merges 3 shards: {out[-800:]}")
    check((merged_cases(run_dir / "merged.json") or ())[:2] == (9, 1), "the Slurm merge holds all 9 random cases")
    check((run_dir / "merged.xml").exists() and (run_dir / "merged.xml").read_text().startswith("<?xml"),
          "the Slurm merge writes JUnit XML")
    status, out = run(["bash", str(merge)], {"LOGPROBS_CHECK": str(CHECK)})
    check(status != 0 and "RUN_DIR" in out, "the Slurm merge step without RUN_DIR says so")


def shell_of(container):
    check(container["command"] == ["/bin/sh", "-c"], f"{container['name']} runs a shell script")
    return container["args"][0]


def env_of(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_kubernetes(files, work):
    documents = list(yaml.safe_load_all(files["logprobs-check-job.yaml"]))
    jobs = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Job"}
    shards, merge = jobs["logprobs-check"]["spec"], jobs["logprobs-check-merge"]["spec"]
    check(shards["completionMode"] == "Indexed", "the shard Job is an Indexed Job")
    count = shards["completions"]
    shard = shards["template"]["spec"]["containers"][0]
    check(env_of(shard)["LOGPROBS_SHARD_COUNT"] == str(count), "LOGPROBS_SHARD_COUNT equals completions")
    wait = merge["template"]["spec"]["initContainers"][0]
    check(env_of(wait)["SHARDS"] == str(count), "the merge Job waits for as many reports as completions")
    reports = work / "reports"
    reports.mkdir()
    path = {"PATH": f"{CHECK.parent}:{os.environ['PATH']}"}
    for index in range(count):
        env = {**env_of(shard), **path, "REPORTS": str(reports), "CASES": "16", "JOB_COMPLETION_INDEX": str(index)}
        status, out = run(["/bin/sh", "-c", shell_of(shard)], env)
        check(status == 0, f"Kubernetes shard {index} exits 0: {out[-800:]}")
    status, out = run(["/bin/sh", "-c", shell_of(wait)], {**env_of(wait), "REPORTS": str(reports)}, timeout=30)
    check(status == 0, "the merge Job's init container sees every report")
    container = merge["template"]["spec"]["containers"][0]
    status, out = run(["/bin/sh", "-c", shell_of(container)], {**env_of(container), **path, "REPORTS": str(reports)})
    check(status == 0 and f"{count} shards of seed" in out, f"the merge Job merges {count} shards: {out[-800:]}")
    check((merged_cases(reports / "merged.json") or ())[:2] == (16, 1), "the Kubernetes merge holds all 16 random cases")
    # A bad usage still fails the pod; a disagreement (exit 1) does not.
    status, _ = run(["/bin/sh", "-c", shell_of(shard)], {**env_of(shard), **path, "REPORTS": str(reports),
                                                          "CASES": "0", "JOB_COMPLETION_INDEX": "0"})
    check(status != 0, "a shard given no --cases fails its pod")


def test_github(files):
    workflow = yaml.safe_load(files[".github/workflows/logprobs-check.yml"])
    jobs = workflow["jobs"]
    check(set(jobs) == {"build", "shard", "merge"}, "the workflow has build, shard and merge jobs")
    shard = jobs["shard"]
    check(len(shard["strategy"]["matrix"]["shard"]) >= 2, "the shard job is a matrix")
    check(shard["env"] == {"LOGPROBS_SHARD_INDEX": "${{ strategy.job-index }}",
                           "LOGPROBS_SHARD_COUNT": "${{ strategy.job-total }}"}, "the matrix passes its shard")
    steps = " ".join(s.get("run", "") for s in shard["steps"])
    check("--shard auto" in steps and "--junit" in steps, "the shard step runs --shard auto with --junit")
    merge = jobs["merge"]
    check("shard" in merge["needs"] and "always()" in merge["if"], "merge runs after the shards, whatever they did")
    check(any("merge artifacts/shard-*/shard-*.json" in s.get("run", "") for s in merge["steps"]),
          "merge reads every shard's report")
    check(any("junit" in s.get("uses", "") for s in merge["steps"]), "merge shows the JUnit file")


def test_gitlab(files):
    pipeline = yaml.safe_load(files[".gitlab-ci.yml"])
    check(pipeline["shard"]["parallel"] >= 2 and "--shard auto" in " ".join(pipeline["shard"]["script"]),
          "GitLab's shard job is parallel and reads its shard")
    check(pipeline["merge"]["when"] == "always", "GitLab's merge job runs whatever the shards did")


def command_lines(text, sub):
    """Each `logprobs-check SUB ...` of the recipes with its continuation lines: those after a
    trailing backslash, and (YAML folded scalars, GitLab script items) those starting with --."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not re.search(rf"(?:logprobs-check|LOGPROBS_CHECK)\"? {sub} ", line):
            continue
        command = [line]
        while i + 1 < len(lines) and (command[-1].rstrip().endswith("\\") or lines[i + 1].lstrip().startswith("--")):
            i += 1
            command.append(lines[i])
        found.append(" ".join(command))
    return found


def test_options(files):
    text = "\n".join(files.values())
    for sub in ("campaign", "merge"):
        help_text = run([str(CHECK), sub, "--help"], {})[1]
        commands = command_lines(text, sub)
        check(commands, f"a recipe runs logprobs-check {sub}")
        for option in sorted({o for c in commands for o in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", c)}):
            check(option in help_text, f"logprobs-check {sub} has the option {option} that a recipe gives it")


def main():
    files = recipes()
    want = {".github/workflows/logprobs-check.yml", ".gitlab-ci.yml", "logprobs-check.sbatch",
            "logprobs-check-merge.sbatch", "logprobs-check-job.yaml"}
    if not check(want <= set(files), f"docs/ci.md has the recipes {sorted(want - set(files))}"):
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        test_slurm(files, work)
        test_kubernetes(files, work)
    test_github(files)
    test_gitlab(files)
    test_options(files)
    print(f"{'FAILED' if failures else 'PASSED'}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
