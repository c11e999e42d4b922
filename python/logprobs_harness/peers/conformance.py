"""The conformance run: a peer judged on the campaign's hand cases and random cases, within the
conventions it declares, each disagreement sorted into the property it breaks; the first case of
each property is shrunk (random cases) and written with the line that replays it."""
import dataclasses
import os
import shlex
import sys
import time
import warnings
from typing import Dict, List, Optional

import numpy

from . import PeerRaised
from .. import cases as case_source
from ..batch import Batch
from ..files import save_batch, save_result
from ..invariance import PROPERTIES as INVARIANCE
from ..invariance import Checker, InvarianceReport, other_ks
from ..judging import judge, run

# The last two hold our port of MAX's kernel (the max backend) to the real one, bit for bit:
# its tokens (the heap's algorithm) and its values (which also carry the exp and log used).
# repeat, batch, k and layout are check_invariance's (logprobs_harness.invariance), in its words.
PROPERTIES = ("values", "tokens", "ties", "padding", "special values", "ranks", "echo rows") + INVARIANCE + (
    "raised", "port tokens", "port values")
_TOKEN_RULES = {"shape", "last_token", "token_range", "duplicate_token", "not_candidate", "not_top"}
INVARIANCE_ALONE_ROWS = 4  # of each case's output rows, rerun alone (check_invariance's default: 16)
_RULE_PROPERTY = {"padding_count": "padding", "value": "values", "greedy_exact": "values", "rank": "ranks"}


@dataclasses.dataclass
class Finding:
    property: str
    case: str
    k: int
    message: str
    files: List[str] = dataclasses.field(default_factory=list)
    replay: Optional[str] = None
    shrink_steps: int = 0


@dataclasses.dataclass
class PeerReport:
    name: str
    package: str
    version: Optional[str] = None
    available: bool = False
    reason: str = ""
    cases: int = 0
    disagreements: int = 0
    # property -> [cases that exercise it, cases that disagree on it]
    properties: Dict[str, List[int]] = dataclasses.field(default_factory=lambda: {p: [0, 0] for p in PROPERTIES})
    findings: List[Finding] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    error: bool = False             # the adapter failed (reason: its traceback): the run fails


@dataclasses.dataclass
class Case:
    label: str                      # "hand: NaN in a row" or "random: case seed S, size Z"
    batch: Batch
    k: int
    seed: Optional[int] = None      # random cases: drawn again and shrunk from (seed, size, options)
    size: Optional[int] = None
    options: Optional[case_source.Options] = None


def refusal(conventions, batch, k=None):
    """Why a peer does not take this batch (and K), or None when it does."""
    if batch.dtype not in conventions.dtypes:
        return f"it takes {', '.join(conventions.dtypes)} logits, not {batch.dtype}"
    if batch.temperatures is not None and not conventions.temperatures:
        return "it applies no temperatures"
    if k is not None and k not in conventions.ks:
        return f"it takes K in {', '.join(map(str, conventions.ks))}, not {k}"
    return None


def campaign_cases(conventions, seed, count):
    """The hand cases the peer takes, at each K it takes; then `count` random cases, the dtypes it
    takes in turn, temperatures only where it applies them, K in turn over its Ks."""
    for name, batch in case_source.hand_cases():
        if refusal(conventions, batch) is None:
            for k in conventions.ks:
                yield Case(f"hand: {name}", batch, k)
    for index in range(count):
        options = case_source.Options(dtype=conventions.dtypes[index % len(conventions.dtypes)],
                                      temperatures=None if conventions.temperatures else False)
        case = case_source.draw_case(seed, index, count, k=list(conventions.ks), ranks=False, options=options)
        yield Case(f"random: case seed {case.seed}, size {case.size}", case.batch, case.k, case.seed, case.size,
                   options)


def row_kinds(batch, k):
    """Per output row: (special, tied, short of candidates, echo)."""
    x, plan = batch.numpy_x(), batch.plan()
    kinds = []
    for o in range(len(plan)):
        row = x[o]
        candidates = row[~numpy.isnan(row) & (row > -numpy.inf)]
        special = not numpy.isfinite(row).all()
        tied = len(numpy.unique(candidates)) < len(candidates)
        echo = o + 1 < len(plan) and plan.batch_items[o + 1] == plan.batch_items[o]
        kinds.append((special, tied, len(candidates) < k, echo))
    return kinds


class Quiet:
    """A peer's kernel with the warnings its arithmetic raises (numpy's overflow and invalid
    value on NaN and infinite rows) kept out of the run's output: what it returns is judged."""

    def __init__(self, kernel):
        self.kernel, self.version = kernel, kernel.version

    def __call__(self, batch, k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.kernel(batch, k)


class Judge:
    """Judges one peer's cases into a PeerReport; `out_dir` receives each finding's files (None:
    none are written)."""

    def __init__(self, peer, kernel, out_dir, replay_program):
        self.peer, self.kernel = peer, Quiet(kernel)
        self.out_dir = None if out_dir is None else os.path.abspath(out_dir)  # replay lines run from anywhere
        self.conventions = peer.conventions
        self.replay_program = replay_program
        self.report = PeerReport(peer.name, peer.package, kernel.version, True)
        self.port = peer.name == "max"  # our port of MAX's kernel, held to the real one bit for bit
        self.invariance = Checker(self.kernel, 0, False, InvarianceReport(), alone_rows=INVARIANCE_ALONE_ROWS)

    def case(self, case):
        """Judges one case; returns the properties it disagrees on."""
        report, counts = self.report, self.report.properties
        report.cases += 1
        broken = set()
        try:
            result = self.kernel(case.batch, case.k)
        except PeerRaised as e:
            counts["raised"][0] += 1
            counts["raised"][1] += 1
            self._finding("raised", case, str(e), None)
            report.disagreements += 1
            return {"raised"}
        counts["raised"][0] += 1
        verdict = judge(case.batch, case.k, result, **self.conventions.judge_options())
        kinds = row_kinds(case.batch, case.k)
        self._count_exercised(kinds, case.k)
        for v in verdict.violations:
            for name in _properties(v, kinds) - broken:
                broken.add(name)
                self._finding(name, case, v.message, result)
        if not verdict.ok and not broken:  # violations counted, none kept (the judge's limit)
            broken.add("values")
            self._finding("values", case, verdict.summary(), result)
        if kinds:
            for name in INVARIANCE:
                counts[name][0] += name != "k" or bool(other_ks(case.k, self.conventions.ks))
            moved = self.invariance.breaks(case.batch, case.k, self.conventions.ks, INVARIANCE, case.seed or 0,
                                           base=result)
            for name, detail in moved.items():
                broken.add(name)
                self._finding(name, case, detail[2], result)
        if self.port:
            ours = run("max", case.batch, case.k)
            for name, mine, real in (("port tokens", ours.lp_tokens, result.lp_tokens),
                                     ("port values", ours.lp_logits, result.lp_logits)):
                counts[name][0] += 1
                if mine.tobytes() != real.tobytes():
                    broken.add(name)
                    self._finding(name, case, _first_difference(ours, result), result)
        for name in broken:
            counts[name][1] += 1
        report.disagreements += bool(broken)
        return broken

    def _count_exercised(self, kinds, k):
        counts = self.report.properties
        plain = [kind for kind in kinds if not kind[0]]
        for name, exercised in (("values", bool(plain)), ("tokens", k > 0 and bool(plain)),
                                ("ties", k > 0 and any(kind[1] for kind in plain)),
                                ("padding", k > 0 and any(kind[2] for kind in plain)),
                                ("special values", any(kind[0] for kind in kinds)),
                                ("ranks", self.conventions.ranks is not None and bool(kinds)),
                                ("echo rows", any(kind[3] for kind in kinds))):
            counts[name][0] += exercised

    def _finding(self, name, case, message, result):
        """The first case of each property is kept: shrunk when it is a random case, written, and
        given the command that replays it."""
        if any(f.property == name for f in self.report.findings):
            return
        batch, steps = case.batch, 0
        if case.seed is not None and name not in INVARIANCE and not name.startswith("port"):
            smaller, steps, _ = case_source.find_counterexample(
                case.seed, case.size, lambda b: name in self._breaks(b, case.k), case.options, max_tries=300)
            if smaller is not None:
                batch = smaller
                result = None if name == "raised" else self.kernel(batch, case.k)
        if self.out_dir is None:  # judging a given file: nothing to write, it is its own replay
            self.report.findings.append(Finding(name, case.label, case.k, message))
            return
        stem = os.path.join(self.out_dir, self.peer.name, name.replace(" ", "-"))
        os.makedirs(os.path.dirname(stem), exist_ok=True)
        files = [f"{stem}-batch.safetensors"]
        save_batch(files[0], batch, k=case.k, metadata={"origin": f"logprobs_harness.peers {self.peer.name}",
                                                        "case": case.label})
        if result is not None:
            files.append(f"{stem}-result.safetensors")
            save_result(files[1], result, metadata={"k": str(case.k), "peer": self.peer.name,
                                                    "peer_version": self.kernel.version})
        replay = shlex.join(self.replay_program + ["--peers", self.peer.name, "--batch", files[0], "--k",
                                                   str(case.k)])
        self.report.findings.append(Finding(name, case.label, case.k, message, files, replay, steps))

    def _breaks(self, batch, k):
        """The properties (but invariance's and the port's) a batch breaks: the shrink's predicate."""
        try:
            result = self.kernel(batch, k)
        except PeerRaised:
            return {"raised"}
        verdict = judge(batch, k, result, **self.conventions.judge_options())
        kinds = row_kinds(batch, k)
        return set().union(*(_properties(v, kinds) for v in verdict.violations))


def _properties(violation, kinds):
    """The properties a violation breaks: by its rule, unless its row holds a NaN or an infinity
    (special values) or ties (a token rule: ties); and echo rows, on a row before its item's last."""
    special, tied, _, echo = kinds[violation.row] if violation.row < len(kinds) else (False, False, False, False)
    if special:
        found = {"special values"}
    elif violation.rule in _TOKEN_RULES:
        found = {"ties" if tied else "tokens"}
    else:
        found = {_RULE_PROPERTY.get(violation.rule, "values")}
    return found | ({"echo rows"} if echo else set())


def _first_difference(ours, real):
    a, b = numpy.asarray(ours.lp_logits), numpy.asarray(real.lp_logits)
    ta, tb = numpy.asarray(ours.lp_tokens), numpy.asarray(real.lp_tokens)
    for o in range(len(a)):
        if a[o].tobytes() != b[o].tobytes() or ta[o].tobytes() != tb[o].tobytes():
            return (f"output row {o}: our port gives tokens {ta[o].tolist()} values {a[o].tolist()}, MAX's kernel "
                    f"tokens {tb[o].tolist()} values {b[o].tolist()}")
    return "the results differ in shape"


def judge_peer(peer, kernel, seed, count, out_dir, replay_program, progress=sys.stderr):
    """The whole run for one peer: a PeerReport."""
    start = time.monotonic()
    j = Judge(peer, kernel, out_dir, replay_program)
    for case in campaign_cases(peer.conventions, seed, count):
        j.case(case)
    j.report.seconds = time.monotonic() - start
    if progress:
        print(f"peers: {peer.name} {kernel.version}: {j.report.cases} cases in {j.report.seconds:.1f} s",
              file=progress)
    return j.report
