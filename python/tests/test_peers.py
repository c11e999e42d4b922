"""The peers' conformance run, on kernels of our own where no peer is installed (Debian's
interpreter): an honest kernel gives no finding, planted ones are sorted into the property they
break, shrunk and written with a replay line; the command line's usage errors, missing peers,
and its JSON and JUnit reports. The real peers run in CI's peers stage (ci/peers)."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import numpy
import pytest

import logprobs_harness as lh
from logprobs_harness import peers
from logprobs_harness.peers import conformance

CHECK = os.environ.get("LOGPROBS_CHECK")
PLANTED = peers.Peer("planted", "none", "none", "our cpu backend, planted with a bug",
                     peers.Conventions(ks=(0, 3, 20), dtypes=("f32", "bf16"), temperatures=True))


class Backend:
    """A kernel(batch, k) over one of our backends, with a change applied to its packed result."""

    version = "test"

    def __init__(self, change=None):
        self.change = change

    def __call__(self, batch, k):
        result = lh.run("cpu", batch, k)
        if self.change is None:
            return result
        values, tokens = numpy.asarray(result.lp_logits).copy(), numpy.asarray(result.lp_tokens).copy()
        self.change(batch, values, tokens)
        return lh.Result.packed(values, tokens, k=k)


def run_judge(kernel, tmp_path, count=40):
    return conformance.judge_peer(PLANTED, kernel, 3, count, str(tmp_path), ["peers-replay"], progress=None)


def test_an_honest_kernel_gives_no_finding(tmp_path):
    report = run_judge(Backend(), tmp_path)
    assert report.cases > 40 and report.disagreements == 0 and report.findings == []
    exercised = {name for name, (cases, _) in report.properties.items() if cases}
    assert {"values", "tokens", "ties", "padding", "special values", "echo rows", "repeat", "batch", "k",
            "layout"} <= exercised


def shifted(batch, values, tokens):
    values += numpy.float32(1e-3)


def last_row_first_token(batch, values, tokens):
    if len(tokens) > 1 and tokens.shape[1] > 1:
        tokens[-1, 0] = tokens[0, 0]  # the top slot of another row


def depends_on_batch(batch, values, tokens):
    if len(values) > 1:
        values[:, -1] += numpy.float32(2 ** -20)  # within tolerance, but not the bits a row alone gets


@pytest.mark.parametrize("change, property_", [(shifted, "values"), (last_row_first_token, "tokens"),
                                               (depends_on_batch, "batch")])
def test_a_planted_bug_is_found_under_its_property_and_written(tmp_path, change, property_):
    report = run_judge(Backend(change), tmp_path)
    assert report.properties[property_][1] > 0
    finding = next(f for f in report.findings if f.property == property_)
    assert finding.replay.startswith("peers-replay --peers planted --batch ")
    batch = lh.load_batch(finding.files[0])
    assert batch.k == finding.k
    if property_ != "batch":
        verdict = lh.judge(batch, finding.k, lh.load_result(finding.files[1]))
        assert not verdict.ok
        if CHECK:  # the written files replay under logprobs-check too
            done = subprocess.run([CHECK, "verify", "--input", finding.files[0], "--result", finding.files[1], "--k",
                                   str(finding.k)], capture_output=True, text=True)
            assert done.returncode == 1, done.stdout + done.stderr


def wide_bf16_rows_shifted(batch, values, tokens):
    if batch.dtype == "bf16" and batch.vocab >= 1000:
        values += numpy.float32(1e-3)


def test_a_random_finding_is_shrunk_and_keeps_its_property(tmp_path):
    report = run_judge(Backend(wide_bf16_rows_shifted), tmp_path, count=60)
    finding = next(f for f in report.findings if f.property == "values")
    assert finding.case.startswith("random") and finding.shrink_steps > 0
    smallest = lh.load_batch(finding.files[0])
    assert smallest.dtype == "bf16" and smallest.vocab >= 1000 and smallest.output_rows == 1
    assert not lh.judge(smallest, finding.k, lh.load_result(finding.files[1])).ok


def test_a_peer_that_raises_is_a_finding_not_a_crash(tmp_path):
    def raising(batch, k):
        raise peers.PeerRaised("ValueError: not today")

    raising.version = "test"
    report = run_judge(raising, tmp_path, count=5)
    assert report.properties["raised"][1] == report.cases and report.findings[0].property == "raised"


def test_conventions_say_what_a_peer_takes():
    max_peer = peers.PEERS["max"].conventions
    assert max_peer.ks == tuple(2**levels - 1 for levels in range(9)) and max_peer.judge_options() == {
        "sum_rule": "linear"}
    assert all(peer.conventions.max_k >= 0 for peer in peers.PEERS.values())
    with pytest.raises(ValueError):
        peers.Conventions(ks=(0,), ranks="count_of_something")


def command(tmp_path, *args):
    environment = dict(os.environ, LOGPROBS_PEERS_PROGRAM="peers")
    return subprocess.run([sys.executable, "-m", "logprobs_harness.peers", "--environments", str(tmp_path / "none"),
                           *args], capture_output=True, text=True, env=environment, cwd=tmp_path)


@pytest.mark.parametrize("args, says", [(["--peers", "vllmm"], "unknown peer vllmm"),
                                        (["--cases", "-1"], "--cases -1 is below 0"),
                                        (["--batch", "x.safetensors"], "--batch and --k go together"),
                                        (["--seed", "-4"], "--seed -4"),
                                        (["--batch", "missing.safetensors", "--k", "0"], "--batch missing.safetensors"),
                                        (["--fail-on", "port bits"], "unknown property in --fail-on port bits")])
def test_usage_errors_exit_2(tmp_path, args, says):
    done = command(tmp_path, *args)
    assert done.returncode == 2 and says in done.stderr


def test_a_missing_peer_is_a_skip_that_names_its_package_unless_required(tmp_path):
    missing = [name for name in peers.PEERS if not _importable(name)]
    if not missing:
        pytest.skip("every peer imports in this interpreter")
    name = missing[0]
    done = command(tmp_path, "--peers", name, "--cases", "2", "--json", "report.json", "--junit", "report.xml")
    assert done.returncode == 0, done.stderr
    assert f"{name}: not available" in done.stdout and f"pip install {peers.PEERS[name].package}" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text())["peers"][0]
    assert report["name"] == name and report["available"] is False and report["cases"] == 0
    suite = ElementTree.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert suite.get("skipped") == "1"
    done = command(tmp_path, "--peers", name, "--require", name)
    assert done.returncode == 1 and f"{name} is not available" in done.stderr


def _importable(name):
    try:
        peers.load(name)
        return True
    except peers.PeerUnavailable:
        return False
