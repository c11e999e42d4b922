"""python3 -m logprobs_harness.peers: the real peers judged on the campaign's cases (docs/peers.md).

Each peer runs where its package imports: in this interpreter, or else in its own environment
under --environments (build/peers/NAME, made by `ci/install-deps --peers`), as a worker process
of this module. Exit 0 when it ran (a disagreement is a finding: shown, written, replayable),
1 when a required peer is missing, an available peer judged no case or an adapter failed, 2 bad
usage. With --batch FILE --k K it judges one batch file (a finding's replay): exit 1 on a
disagreement.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import traceback

from . import PEERS, PeerUnavailable, load
from .._native import LogprobsError
from ..files import load_batch
from ..judging import module_command
from .conformance import PROPERTIES, Case, Finding, Judge, PeerReport, judge_peer, refusal
from .report import cell, table, write_json, write_junit


def replay_program():
    """The words that rerun this module as pasted in a shell: $LOGPROBS_PEERS_PROGRAM (ci/peers
    sets it to itself), else this interpreter with the package's folder on PYTHONPATH."""
    given = os.environ.get("LOGPROBS_PEERS_PROGRAM")
    return shlex.split(given) if given else module_command("logprobs_harness.peers")


def parse(argv):
    parser = argparse.ArgumentParser(prog="logprobs_harness.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated (default: {','.join(PEERS)})")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random cases (default 1)")
    parser.add_argument("--cases", type=int, default=200, help="random cases per peer (default 200)")
    parser.add_argument("--json", help="also write the report as JSON to this file")
    parser.add_argument("--junit", help="also write it as JUnit XML to this file")
    parser.add_argument("--out-dir", default="peers-findings", help="folder for the findings' files")
    parser.add_argument("--require", default="", help="comma-separated peers whose absence fails the run")
    parser.add_argument("--fail-on", default="", help="comma-separated properties on which any disagreement fails "
                                                      "the run (CI: 'port tokens', our port's claim)")
    parser.add_argument("--environments", default=os.environ.get("LOGPROBS_PEERS_DIR", "build/peers"),
                        help="folder of the peers' virtual environments (default $LOGPROBS_PEERS_DIR or build/peers)")
    parser.add_argument("--batch", help="judge this one batch file (a finding's replay); needs --k")
    parser.add_argument("--k", type=int, help="K for --batch")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.peers = [p for p in args.peers.split(",") if p]
    args.require = [p for p in args.require.split(",") if p]
    args.fail_on = [p.strip() for p in args.fail_on.split(",") if p.strip()]
    if set(args.fail_on) - set(PROPERTIES):
        parser.error(f"unknown property in --fail-on {', '.join(sorted(set(args.fail_on) - set(PROPERTIES)))} "
                     f"(known: {', '.join(PROPERTIES)})")
    unknown = [p for p in args.peers + args.require if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)} (known: {', '.join(PEERS)})")
    if not 0 <= args.seed < 2**64:
        parser.error(f"--seed {args.seed} is not in 0..2^64-1")
    if args.cases < 0:
        parser.error(f"--cases {args.cases} is below 0")
    if (args.batch is None) != (args.k is None):
        parser.error("--batch and --k go together")
    if args.k is not None and not 0 <= args.k <= 65535:
        parser.error(f"--k {args.k} is not in 0..65535")
    if args.batch:
        try:
            load_batch(args.batch)
        except LogprobsError as e:
            parser.error(f"--batch {args.batch}: {e}")
    return args


def in_worker(args, name):
    """The peer's report from a worker in its environment, or None when it has none."""
    python = os.path.join(os.path.abspath(args.environments), name, "bin", "python")
    if not os.path.exists(python) or os.path.realpath(sys.prefix) == os.path.realpath(os.path.dirname(
            os.path.dirname(python))):
        return None
    with tempfile.TemporaryDirectory(prefix="logprobs-peers-") as scratch:
        output = os.path.join(scratch, "report.json")
        command = [python, "-m", "logprobs_harness.peers", "--worker", "--peers", name, "--seed", str(args.seed),
                   "--cases", str(args.cases), "--out-dir", args.out_dir, "--json", output]
        if args.batch:
            command += ["--batch", args.batch, "--k", str(args.k)]
        environment = dict(os.environ, LOGPROBS_PEERS_PROGRAM=shlex.join(replay_program()))
        finished = subprocess.run(command, env=environment)
        if not os.path.exists(output):
            return PeerReport(name, PEERS[name].package, reason=f"its worker ended with status {finished.returncode} "
                                                                f"and no report", error=True)
        with open(output) as f:
            data = json.load(f)["peers"][0]
    data["findings"] = [Finding(**f) for f in data["findings"]]
    return PeerReport(**data)


def here(args, name):
    """The peer's report from this interpreter."""
    peer = PEERS[name]
    try:
        kernel = load(name)
    except PeerUnavailable as e:
        return PeerReport(name, peer.package, reason=str(e))
    try:
        if args.batch:
            judge = Judge(peer, kernel, None, replay_program())
            batch = load_batch(args.batch)
            why = refusal(peer.conventions, batch, args.k)
            if why:
                judge.report.reason = f"does not take this batch: {why}"
            else:
                judge.case(Case(f"file: {args.batch}", batch, args.k))
            return judge.report
        return judge_peer(peer, kernel, args.seed, args.cases, args.out_dir, replay_program())
    except Exception:  # an adapter's failure (the peer's own raise is a finding): the run fails
        return PeerReport(name, peer.package, kernel.version, True, reason=traceback.format_exc(), error=True)


def main(argv=None):
    args = parse(argv)
    reports = []
    for name in args.peers:
        report = None if args.worker else in_worker(args, name)
        reports.append(report or here(args, name))
    if args.json:
        write_json(args.json, reports, args)
    if args.junit:
        write_junit(args.junit, reports)
    if args.worker:
        return 0
    print(table(reports))
    for report in reports:
        for finding in report.findings:
            print(f"{report.name}: {finding.property}: {finding.case}, K = {finding.k}: {finding.message}")
            if finding.replay:
                print(f"  replay: {finding.replay}")
    for report in reports:
        if report.available and report.reason and not report.error:
            print(f"{report.name}: {report.reason}")
    failed = [r for r in reports if r.error] + [r for r in reports if r.available and not r.cases and not args.batch]
    failed += [r for r in reports if r.name in args.require and not r.available]
    for report in failed:
        what = "failed" if report.error else ("judged no case" if report.available else "is not available")
        print(f"peers: {report.name} {what}: {report.reason}", file=sys.stderr)
    for report in reports:
        for name in args.fail_on:
            if report.properties[name][1]:
                failed.append(report)
                print(f"peers: {report.name} disagrees on {name} ({cell(*report.properties[name])} cases), which "
                      f"--fail-on makes a failure", file=sys.stderr)
    if failed:
        return 1
    if args.batch:
        return 1 if any(r.disagreements for r in reports) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
