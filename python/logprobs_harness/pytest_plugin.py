"""The pytest plugin: a `logprobs_case` fixture of random cases from the harness's generators,
and a failing case shrunk before it is reported, with the files and commands that replay it; and
a `logprobs_invariance` fixture that checks a kernel's determinism and batch invariance
(check_invariance: `logprobs_invariance(my_kernel, k=20)`).

    def test_my_kernel(logprobs_case):
        batch, k = logprobs_case.batch, logprobs_case.k
        top_tokens, top_logprobs, sampled_logprobs = my_kernel(batch.torch_logits(), ...)
        logprobs_case.assert_agrees(top_tokens=top_tokens, top_logprobs=top_logprobs,
                                    sampled_logprobs=sampled_logprobs)

Options: --logprobs-seed S (default: a fresh seed, printed in the header), --logprobs-cases N
(20), --logprobs-max-shrinks N (1000 test runs), --logprobs-replay-dir DIR, --logprobs-replay
BATCH_FILE (run each such test on one written batch). A test narrows its cases with
@pytest.mark.logprobs(k=..., ranks=..., cases=..., dtype=..., vocab=..., offsets=...,
temperatures=..., finite=...).

Shrinking: when the test fails, the plugin asks the C API to shrink the case's batch with
RapidCheck's shrinks (the generator's own: fewer batch items and rows, smaller V, plainer
values, no injected specials), running the test again on each candidate; a candidate fails when
the test raises the same exception type (for a Disagreement: one that breaks the original's
first rule). The smallest failing batch is run once more, with replay files, and that failure
is reported, with the sizes before and after.
"""
import argparse
import hashlib
import os
import secrets
import shlex
import sys

import pytest

from . import _native, files, judging
from .cases import Case, Options, draw_case, find_counterexample

_SEED = pytest.StashKey[int]()
_SETTINGS = {"k", "ranks", "cases", "sizes", "dtype", "vocab", "offsets", "temperatures", "finite"}


def _at_least_one(option):
    """An argparse type: a whole number >= 1. Zero cases (a CI variable set to 0) would make every
    test of the plugin a skip, a gate turned off without a word."""
    def parse(text):
        try:
            return _native.checked_count(int(text), option)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option}: must be a whole number >= 1, got {text!r}") from None
    return parse


def pytest_addoption(parser):
    group = parser.getgroup("logprobs_harness", "logprobs_harness: random logprobs cases")
    group.addoption("--logprobs-seed", type=int, default=None,
                    help="seed of the random cases (default: a fresh one, printed in the header)")
    group.addoption("--logprobs-cases", type=_at_least_one("--logprobs-cases"), default=20,
                    help="random cases per test (default 20)")
    group.addoption("--logprobs-max-shrinks", type=_at_least_one("--logprobs-max-shrinks"), default=1000,
                    help="test runs a failure's shrinking may spend (default 1000)")
    group.addoption("--logprobs-replay-dir", default=None,
                    help="where failing cases' batch and result files go (default: pytest's temporary folder)")
    group.addoption("--logprobs-replay", default=None, metavar="BATCH_FILE",
                    help="run each logprobs_case test on this batch file (K and ranks from its metadata)")


def pytest_configure(config):
    config.addinivalue_line("markers", "logprobs(k=20, ranks=None, cases=None, sizes=None, dtype=None, vocab=None, "
                                       "offsets=None, temperatures=None, finite=False): this test's random cases")
    seed = config.getoption("logprobs_seed")
    config.stash[_SEED] = seed if seed is not None else secrets.randbits(63)


def pytest_report_header(config):
    seed = config.stash[_SEED]
    return (f"logprobs_harness: seed {seed} (--logprobs-seed {seed} draws these cases again), "
            f"{config.getoption('logprobs_cases')} cases per test; {_native.library_path}")


class _CaseSpec:
    """Case `index` of a test's random cases, drawn when the test runs."""

    def __init__(self, seed, index, count, settings):
        self.seed, self.index, self.count, self.settings = seed, index, count, settings

    def draw(self):
        s = dict(self.settings)
        options = Options(s.pop("dtype", None), s.pop("vocab", None), s.pop("offsets", None),
                          s.pop("temperatures", None), s.pop("finite", False))
        return draw_case(self.seed, self.index, self.count, s.get("k", 20), s.get("ranks"), s.get("sizes"), options)


class _ReplaySpec:
    """The one batch of --logprobs-replay, with the K and ranks its metadata records."""

    def __init__(self, path, settings):
        self.path, self.settings = path, settings

    def draw(self):
        batch = files.load_batch(self.path)
        k = batch.k if batch.k is not None else self.settings.get("k", 20)
        return Case(batch, k, batch.metadata.get("ranks") == "true")


def pytest_generate_tests(metafunc):
    if "logprobs_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("logprobs")
    settings = dict(marker.kwargs) if marker else {}
    unknown = set(settings) - _SETTINGS
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.logprobs: unknown settings {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(sorted(_SETTINGS))})")
    replay = metafunc.config.getoption("logprobs_replay")
    if replay:
        metafunc.parametrize("logprobs_case", [_ReplaySpec(replay, settings)], ids=["replay"], indirect=True)
        return
    try:
        count = settings.pop("cases", None)
        count = metafunc.config.getoption("logprobs_cases") if count is None else _native.checked_count(count, "cases")
        k = settings.get("k", 20)
        if not (isinstance(k, str) and k == "random"):
            for each in (k if isinstance(k, (list, tuple, range)) else [k]):
                _native.checked_k(each)
    except _native.InvalidArgument as e:
        raise pytest.UsageError(f"@pytest.mark.logprobs on {metafunc.definition.nodeid}: {e}") from None
    seed = metafunc.config.stash[_SEED]
    specs = [_CaseSpec(seed, index, count, settings) for index in range(count)]
    metafunc.parametrize("logprobs_case", specs, ids=[f"case{i}" for i in range(count)], indirect=True)


@pytest.fixture
def logprobs_case(request, tmp_path_factory):
    """A random case (batch, k, ranks) from the harness's generators; see the module's doc."""
    spec = getattr(request, "param", None)
    if spec is None:
        raise pytest.UsageError("logprobs_case is parametrized by the logprobs_harness plugin: use it as a test's "
                                "own argument")
    case = spec.draw()
    case.replay_dir = _replay_dir(request.config, tmp_path_factory)
    return case


def _replay_dir(config, tmp_path_factory):
    """Where failing cases' files go: --logprobs-replay-dir, else pytest's temporary folder."""
    return config.getoption("logprobs_replay_dir") or str(tmp_path_factory.getbasetemp() / "logprobs")


@pytest.fixture
def logprobs_invariance(request, tmp_path_factory):
    """check(kernel, k=20, **options): check_invariance on the kernel with this run's seed and
    --logprobs-cases cases (options as check_invariance's); a kernel whose rows move fails the
    test with each finding, shrunk, its files written and the line that shows it again."""
    from .invariance import check_invariance

    config = request.config
    replay_dir = _replay_dir(config, tmp_path_factory)

    def check(kernel, *, k=20, **options):
        __tracebackhide__ = True
        options.setdefault("seed", config.stash[_SEED])
        options.setdefault("cases", config.getoption("logprobs_cases"))
        report = check_invariance(kernel, k=k, replay_dir=replay_dir, **options)
        if not report.ok:
            raise InvarianceFailure(report.summary(), report)
        return report

    return check


class InvarianceFailure(AssertionError):
    """A kernel's rows moved between calls, batches, K or layouts; `report` holds the findings."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


class ShrunkFailure(AssertionError):
    """A test that failed on a random case with an exception other than a Disagreement, reported
    on the shrunk case (the exception is chained)."""


def _same_failure(original):
    report = original.report if isinstance(original, judging.Disagreement) else None
    # The first kept violation's rule; with none kept (limit=0), the first rule counted.
    rule = (report.violations[0].rule if report.violations else min(report.rules)) if report else None

    def same(failure):
        if type(failure) is not type(original):
            return False
        return rule is None or rule in failure.report.rules

    return same


def _call(function, arguments, case):
    __tracebackhide__ = True
    function(**{**arguments, "logprobs_case": case})


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    case = pyfuncitem.funcargs.get("logprobs_case")
    if not isinstance(case, Case):
        return None  # not a test of ours: pytest calls it as usual
    __tracebackhide__ = True
    function = pyfuncitem.obj
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    folder = judging.default_replay_dir.set(case.replay_dir)
    try:
        try:
            _call(function, arguments, case)
        except Exception as failure:
            if case.seed is None:  # a batch file replayed: nothing to shrink it from
                raise
            _raise_shrunk(pyfuncitem, function, arguments, case, failure)
    finally:
        judging.default_replay_dir.reset(folder)
    return True


def _raise_shrunk(item, function, arguments, case, failure):
    __tracebackhide__ = True
    same = _same_failure(failure)

    def fails(batch):
        quiet = judging.replay_files_enabled.set(False)
        try:
            _call(function, arguments, case.with_batch(batch))
        except Exception as candidate_failure:
            return same(candidate_failure)
        finally:
            judging.replay_files_enabled.reset(quiet)
        return False

    max_tries = item.config.getoption("logprobs_max_shrinks")
    smallest, steps, runs = find_counterexample(case.seed, case.size, fails, case.options, max_tries)
    if smallest is None:
        failure.args = (f"logprobs_harness: {case.describe()} passed when drawn again: the test is not "
                        f"deterministic, so it was not shrunk\n{failure}",)
        raise failure
    shrunk = case.with_batch(smallest)
    os.makedirs(case.replay_dir, exist_ok=True)
    case_file = os.path.join(case.replay_dir, f"{_file_name(item.nodeid)}-shrunk-batch.safetensors")
    files.save_batch(case_file, smallest, k=case.k, metadata={"ranks": "true" if case.ranks else "false",
                                                              "origin": f"{item.nodeid} {case.describe()}"})
    headline = (f"logprobs_harness: {item.name} failed on case {case.index} (case seed {case.seed}, size "
                f"{case.size}, K = {case.k}{', ranks' if case.ranks else ''}); shrunk in {steps} steps ({runs} runs "
                f"of the test)")
    summary = (f"  before: {case.batch.describe()}\n"
               f"  after:  {smallest.describe()}\n"
               f"  the test on the shrunk case: {_replay_command(item, case_file)}")
    try:
        _call(function, arguments, shrunk)
    except judging.Disagreement as again:
        # The diagnosis of the shrunk case first after the headline (also in the disagreement's own text).
        first = "".join(f"\n  {line}" for line in judging.diagnosis_lines(again.diagnoses))
        if same(again):
            again.args = (f"{headline}{first}\n{summary}\n{again}",)
            raise again from None
        raise ShrunkFailure(f"{headline}{first}\n{summary}\n(the shrunk case fails differently)\n{again}") from None
    except Exception as again:
        # Reported with the shrunk run's own traceback, which ends in the test's code.
        raise ShrunkFailure(f"{headline}\n{summary}\n{type(again).__name__}: {again}").with_traceback(
            again.__traceback__) from None
    summary = f"{headline}\n{summary}"
    failure.args = (f"{summary}\n(the shrunk case passed when run again: the test is not deterministic)\n{failure}",)
    raise failure


def _replay_command(item, case_file):
    """The line that runs the test on the shrunk case, as pasted in any folder: from the rootdir the
    test's id is relative to, its id without the case's parameter (the replayed test is
    `[replay]`), and the plugin named unless pytest loaded it as an installed package's."""
    installed = any(getattr(plugin, "__name__", "") == __name__
                    for plugin, _ in item.config.pluginmanager.list_plugin_distinfo())
    words = [sys.executable, "-m", "pytest"] + ([] if installed else ["-p", __name__])
    words += [item.nodeid.split("[", 1)[0], "--logprobs-replay", case_file]
    return f"cd {shlex.quote(str(item.config.rootpath))} && {shlex.join(words)}"


def _file_name(nodeid):
    """A file name for a test: its whole node id made safe (a/test_k.py::test_x[case0] and
    b/test_k.py::test_x[case0] are two tests), shortened, with a digest of the node id so that
    neither shortening nor the safe characters can make two tests share one."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in nodeid).strip("-")[:80]
    return f"{safe}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}"
