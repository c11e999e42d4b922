"""check_invariance: invariant kernels (each row alone in a fixed order; our backends through the
package; PyTorch's log_softmax + topk) give no finding, and each planted break is flagged by the
property it breaks, with its files and a --diff line that shows it again."""
import subprocess

import pytest

import invariance_kernels as kernels
import logprobs_harness as lh

OPTIONS = {"k": 5, "seed": 11, "cases": 12}
PLANTED = dict(OPTIONS, vocab=1000)  # the numpy kernels' row loop is slow at a real vocabulary's size


def test_a_kernel_that_computes_each_row_alone_is_invariant(tmp_path):
    report = lh.check_invariance(kernels.invariant(), replay_dir=str(tmp_path), **PLANTED)
    assert report.ok, report.summary()
    assert all(report.compared[p] > 0 for p in ("repeat", "batch", "k", "layout"))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_our_backends_are_invariant(tmp_path, backend):
    report = lh.check_invariance(lambda batch, k: lh.run(backend, batch, k), replay_dir=str(tmp_path),
                                 temperatures=None, **OPTIONS)
    assert report.ok, report.summary()


@pytest.mark.parametrize("make, breaks", [(kernels.lanes_by_row_count, {"batch"}), (kernels.by_position, {"batch"}),
                                          (kernels.order_per_call, {"repeat"}), (kernels.by_k, {"k"}),
                                          (kernels.by_alignment, {"layout"})])
def test_each_planted_break_is_flagged_by_its_property(tmp_path, make, breaks):
    report = lh.check_invariance(make(), replay_dir=str(tmp_path), **PLANTED)
    flagged = {f.property for f in report.findings}
    assert breaks <= flagged, report.summary()
    if make is not kernels.by_alignment:  # an unaligned first row also moves when the row is alone
        assert flagged == breaks, report.summary()
    finding = next(f for f in report.findings if f.property in breaks)
    assert len(finding.files) == 4 and finding.rows and finding.ulps > 0
    shown = subprocess.run(finding.replay, shell=True, capture_output=True, text=True)
    assert shown.returncode == 1, shown.stdout + shown.stderr  # the --diff line shows the difference again
    assert shown.stdout.strip()


def test_a_finding_is_shrunk(tmp_path):
    report = lh.check_invariance(kernels.by_position(), replay_dir=str(tmp_path), **PLANTED)
    batch = lh.load_batch(report.findings[0].files[0])
    assert batch.output_rows <= 3  # two rows at least show a position; shrinking keeps few more


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown properties"):
        lh.check_invariance(kernels.invariant(), properties=("batchh",), **OPTIONS)
    with pytest.raises(ValueError, match="no ranks"):
        lh.check_invariance(kernels.invariant(), ranks=True, **OPTIONS)


def test_other_ks_stay_within_what_the_kernel_takes():
    from logprobs_harness.invariance import other_ks

    assert other_ks(20) == [0, 10, 41] and other_ks(0) == [1] and other_ks(65535) == [0, 32767]
    assert other_ks(7, ks=[0, 1, 3, 7, 15]) == [0, 3, 15]


def test_pytorch_log_softmax_and_topk(tmp_path):
    torch = pytest.importorskip("torch")

    def kernel(batch, k):
        logits = batch.torch_logits().float()
        plan = batch.plan()
        x = logits[torch.tensor(plan.logit_rows, dtype=torch.long)] if len(plan) else logits[:0]
        if batch.temperatures is not None and len(plan):
            x = x / torch.tensor(list(batch.temperatures))[torch.tensor(plan.batch_items)][:, None]
        lp = torch.log_softmax(x, dim=-1)
        top = torch.topk(lp, min(k, batch.vocab), dim=-1)
        pad = k - top.indices.shape[1]
        tokens = torch.cat([top.indices, torch.full((len(plan), pad), batch.vocab)], 1)
        values = torch.cat([top.values, torch.full((len(plan), pad), float("-inf"))], 1)
        sampled = lp.gather(1, torch.tensor(plan.tokens, dtype=torch.long)[:, None])[:, 0]
        return {"top_tokens": tokens.numpy().astype("uint32"), "top_logprobs": values.numpy(),
                "sampled_logprobs": sampled.numpy()}

    report = lh.check_invariance(kernel, replay_dir=str(tmp_path), dtype="f32", **OPTIONS)
    print(report.summary())  # recorded in docs/python.md as measured
    assert report.cases == OPTIONS["cases"]


def command(*args):
    import sys

    return subprocess.run([sys.executable, "-m", "logprobs_harness.invariance", *args], capture_output=True, text=True)


def test_a_backend_from_the_command_line():
    done = command("--backend", "max", "--k", "7", "--cases", "3")
    assert done.returncode == 0 and "max: 3 cases" in done.stdout and "invariant" in done.stdout, done.stderr
    for args, says in ((["--backend", "max", "--k", "5"], "takes K = 2^L - 1"), (["--backend", "nope"], "unknown"),
                       ([], "give --backend NAME or --diff"), (["--diff", "a", "b"], "a")):
        done = command(*args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
