"""Is a kernel deterministic and batch-invariant (SPEC §6)? check_invariance calls any kernel on
random cases and on variants that must not move a row's bits, and compares the rows:

    repeat  the same batch again (where this moves, the case says only that: every variant would)
    batch   each output row alone in a batch of one; the batch's items reversed, with rows of other
            batches (decode and echo) between them
    k       other K (0, one below, one above): the evaluated token's value and rank, and the value
            of every token reported at both K, are the same bits; the top K' are the K' best of
            the top K
    layout  a wider row stride and an unread leading row (every row at another alignment)

    report = check_invariance(my_kernel, k=20, seed=1, cases=20)
    assert report.ok, report.summary()

`my_kernel(batch, k)` returns a Result or what `judge` takes as keyword arguments (the packed or
the split layout). Each finding carries the two batch and result files that show it and the
command that shows the rows' difference again (`python3 -m logprobs_harness.invariance --diff`).
"""
import array
import dataclasses
import os
import random
import shlex
import struct
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import files
from .batch import Batch
from .cases import Options, draw_case, find_counterexample
from .judging import _result_from, module_command
from .result import Result

PROPERTIES = ("repeat", "batch", "k", "layout")
ALONE_ROWS = 16  # output rows of a case rerun alone in a batch of one
_NAN_BITS = {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00}  # what fills a wider stride's unread columns
_BITS = {"f32": "I", "bf16": "H", "f16": "H"}  # logits are handled as bit patterns: every payload kept


@dataclasses.dataclass(frozen=True)
class InvarianceFinding:
    property: str                 # one of PROPERTIES
    case_seed: Optional[int]      # the case's seed (random_batches' seeds), None for a given batch
    rows: Tuple[int, ...]         # the case's output rows that moved
    ulps: float                   # the largest distance between the two values, in f32 ulps (inf: tokens moved)
    message: str
    files: Tuple[str, ...] = ()   # batch and result of the case, then of the variant
    replay: str = ""


@dataclasses.dataclass
class InvarianceReport:
    cases: int = 0
    calls: int = 0
    compared: Dict[str, int] = dataclasses.field(default_factory=lambda: {p: 0 for p in PROPERTIES})
    findings: List[InvarianceFinding] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        head = (f"{self.cases} cases, {self.calls} kernel calls; rows compared: "
                + ", ".join(f"{p} {n}" for p, n in self.compared.items()))
        return "\n".join([head + (": invariant" if self.ok else f": {len(self.findings)} findings")]
                         + [f"  {f.property}: case seed {f.case_seed}: {f.message}"
                            + (f"\n    show again: {f.replay}" if f.replay else "") for f in self.findings])


# -- rows of a result ------------------------------------------------------------------------------

def _rows(result: Result, batch: Optional[Batch]):
    """(tokens, values, ranks) per output row: the top slots then the evaluated token's slot (whose
    token a split result does not hold: the batch's, or -1 without it)."""
    if result.layout == "packed":
        tokens, values = [list(r) for r in result.lp_tokens.tolist()], result.lp_logits.tolist()
    else:
        evaluated = batch.plan().tokens if batch is not None else [-1] * result.rows
        top_tokens, top_values = result.top_tokens.tolist(), result.top_logprobs.tolist()
        if not result.columns:  # K = 0: the flat view of no top slots
            top_tokens = top_values = [[] for _ in range(result.rows)]
        tokens = [list(t) + [evaluated[o]] for o, t in enumerate(top_tokens)]
        values = [list(v) + [s] for v, s in zip(top_values, result.sampled_logprobs.tolist())]
    ranks = None if result.ranks is None else list(result.ranks)
    return tokens, values, ranks


def _ordered(value: float) -> int:
    bits = struct.unpack("<i", struct.pack("<f", value))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFF)


def ulps_apart(a: float, b: float) -> float:
    """The f32 ulps between two values: 0 for the same bits or two NaNs, inf for a NaN or an
    infinity against anything else."""
    if a != a or b != b:
        return 0.0 if (a != a) == (b != b) else float("inf")
    if a in (float("inf"), float("-inf")) or b in (float("inf"), float("-inf")):
        return 0.0 if a == b else float("inf")
    return float(abs(_ordered(a) - _ordered(b)))


def _row_distance(a, b):
    """The distance between two rows (tokens, values, rank): inf when tokens or ranks differ."""
    (ta, va, ra), (tb, vb, rb) = a, b
    if ta != tb or ra != rb:
        return float("inf")
    return max((ulps_apart(x, y) for x, y in zip(va, vb)), default=0.0)


# -- the variants ----------------------------------------------------------------------------------

@dataclasses.dataclass
class _Item:
    rows: list            # logit rows, each a list of bit patterns in the batch's dtype
    tokens: list
    sampled: int
    outputs: int
    temperature: Optional[float]


def _element_rows(batch):
    bits = memoryview(batch._logits.data).cast(_BITS[batch.dtype]).tolist()
    return [bits[i * batch.row_stride: i * batch.row_stride + batch.vocab] for i in range(batch.rows)]


def _items(batch, rows):
    """The batch's items, `rows` its logit rows' elements (_element_rows)."""
    lro, tro, loo = list(batch.logit_row_offsets), list(batch.token_row_offsets), list(batch.lp_output_offsets)
    tokens, temperatures = list(batch.tokens), batch.temperatures
    return [_Item(rows[lro[b]:lro[b + 1]], tokens[tro[b]:tro[b + 1]], batch.sampled_tokens[b], loo[b + 1] - loo[b],
                  None if temperatures is None else temperatures[b]) for b in range(batch.batch_size)]


def _compose(items, like, stride=None, lead_rows=0):
    """A batch of these items, in `like`'s dtype and V, rows `stride` apart after `lead_rows`
    unread rows; unread elements hold NaN, so a kernel that reads them shows it."""
    vocab, fill = like.vocab, _NAN_BITS[like.dtype]
    stride = stride or vocab
    flat, lro, tro, loo, tokens = [fill] * (stride * lead_rows), [lead_rows], [0], [0], []
    for item in items:
        for row in item.rows:
            flat += list(row) + [fill] * (stride - vocab)
        tokens += item.tokens
        lro.append(lro[-1] + len(item.rows))
        tro.append(len(tokens))
        loo.append(loo[-1] + item.outputs)
    temperatures = None if like.temperatures is None else [1.0 if i.temperature is None else i.temperature
                                                              for i in items]
    logits = array.array("f" if like.dtype == "f32" else "H")
    logits.frombytes(array.array(_BITS[like.dtype], flat).tobytes())
    return Batch(logits, [i.sampled for i in items], tokens=tokens, logit_row_offsets=lro, token_row_offsets=tro,
                 lp_output_offsets=loo, temperatures=temperatures, dtype=None if like.dtype == "f32" else like.dtype,
                 vocab=vocab, row_stride=stride)


def _output_starts(items):
    starts, at = [], 0
    for item in items:
        starts.append(at)
        at += item.outputs
    return starts


def _alone(batch, plan, rows, items, o):
    """Output row o alone in a batch of one (its logit row, evaluated token and temperature)."""
    temperature = items[plan.batch_items[o]].temperature
    return _compose([_Item([rows[plan.logit_rows[o]]], [], plan.tokens[o], 1, temperature)], batch)


def _filler(like, seed, echo):
    """An item of another batch: a decode row, or two echo rows, of the same V and dtype."""
    rng = random.Random(seed)
    n = 2 if echo else 1
    if like.dtype == "f32":
        rows = [[struct.unpack("<I", struct.pack("<f", rng.gauss(0, 2)))[0] for _ in range(like.vocab)]
                for _ in range(n)]
    else:
        rows = [[rng.randrange(0x3000, 0x4000) for _ in range(like.vocab)] for _ in range(n)]  # positive, finite
    return _Item(rows, [rng.randrange(like.vocab)] * (n - 1), rng.randrange(like.vocab), n, 0.8)


def _neighbours(batch, items, seed):
    """The items reversed, each after an item of another batch (decode and echo in turn), and where
    each original output row went."""
    mixed, where = [], {}
    for b in reversed(range(len(items))):
        mixed.append(_filler(batch, seed + b, echo=b % 2 == 1))
        mixed.append(items[b])
    starts, new_starts = _output_starts(items), _output_starts(mixed)
    for position, item in enumerate(mixed):
        if position % 2:
            b = len(items) - 1 - position // 2
            for j in range(item.outputs):
                where[starts[b] + j] = new_starts[position] + j
    return _compose(mixed, batch), where


def other_ks(k, ks=None):
    """0, one K below and one above (within the K the kernel takes, `ks`, when it says)."""
    if ks is None:
        wanted = [0, k // 2 if k > 1 else None, min(2 * k + 1, 65535) if k < 65535 else None]
        return sorted({w for w in wanted if w is not None and w != k})
    allowed = sorted(set(ks))
    below = [x for x in allowed if x < k]
    above = [x for x in allowed if x > k]
    return sorted({x for x in ([0] if 0 in allowed else []) + below[-1:] + above[:1] if x != k})


# -- the check -------------------------------------------------------------------------------------

class Checker:
    """Calls a kernel on a batch and on its variants and says which properties moved (the
    conformance run of the peers uses it too)."""

    def __init__(self, kernel, ulps, ranks, report, alone_rows=ALONE_ROWS):
        self.kernel, self.ulps, self.ranks, self.report = kernel, ulps, ranks, report
        self.alone_rows = alone_rows

    def call(self, batch, k):
        self.report.calls += 1
        got = self.kernel(batch, k)
        result = got if isinstance(got, Result) else _result_from(None, k, dict(got))
        if self.ranks and result.ranks is None:
            raise ValueError("ranks=True, but the kernel's result has no ranks")
        return result

    def breaks(self, batch, k, ks, properties, seed, base=None):
        """{property: (rows, ulps, message, batch, variant batch, its result, the batch's result, k,
        [(row, variant row)])} of what moves; `seed` draws the rows put around the batch's; `base`,
        the kernel's result for the batch when the caller already has it."""
        found = {}
        base = self.call(batch, k) if base is None else base
        rows = _rows(base, batch)
        n = len(rows[0])

        def row(r, o):
            return r[0][o], r[1][o], None if r[2] is None else r[2][o]

        def compare(name, variant, result, pairs):
            other = _rows(result, variant)
            moved = [(o, _row_distance(row(rows, o), row(other, p))) for o, p in pairs]
            self.report.compared[name] += len(pairs)
            moved = [(o, d) for o, d in moved if d > self.ulps]
            if moved and name not in found:
                o, _ = moved[0]
                p = dict(pairs)[o]
                found[name] = ([m for m, _ in moved], max(d for _, d in moved),
                               f"output row {o}: {_show(row(rows, o))}; {_where(name)}: {_show(row(other, p))}",
                               batch, variant, result, base, k, pairs)

        if "repeat" in properties:
            for _ in range(2):
                compare("repeat", batch, self.call(batch, k), [(o, o) for o in range(n)])
            if found:  # a kernel whose bits move from call to call moves in every variant: say only that
                return found
        elements = _element_rows(batch) if n else []
        items = _items(batch, elements)
        if "batch" in properties and n:
            plan = batch.plan()
            for o in range(min(n, self.alone_rows)):
                alone = _alone(batch, plan, elements, items, o)
                compare("batch", alone, self.call(alone, k), [(o, 0)])
            mixed, where = _neighbours(batch, items, seed)
            compare("batch", mixed, self.call(mixed, k), sorted(where.items()))
        if "layout" in properties and n:
            wide = _compose(items, batch, stride=batch.vocab + 1, lead_rows=1)
            compare("layout", wide, self.call(wide, k), [(o, o) for o in range(n)])
        if "k" in properties and n:
            for k2 in other_ks(k, ks):
                self._compare_k(found, rows, batch, base, k, k2)
        return found

    def _compare_k(self, found, rows, batch, base, k, k2):
        result = self.call(batch, k2)
        other = _rows(result, batch)
        self.report.compared["k"] += len(rows[0])
        for o in range(len(rows[0])):
            message = _k_difference(rows, other, o, k, k2)
            if message and "k" not in found:
                found["k"] = ([o], float("inf"), message, batch, batch, result, base, k, [(o, o)])


def _k_difference(a, b, o, k, k2):
    """What moved between row o at K = k (a) and at K = k2 (b), or None."""
    (ta, va), (tb, vb) = (a[0][o], a[1][o]), (b[0][o], b[1][o])
    if ta[-1] != tb[-1] or ulps_apart(va[-1], vb[-1]):
        return (f"output row {o}: the evaluated token's slot ({ta[-1]}, {va[-1]!r}) at K = {k}, ({tb[-1]}, "
                f"{vb[-1]!r}) at K = {k2}")
    if a[2] is not None and b[2] is not None and a[2][o] != b[2][o]:
        return f"output row {o}: rank {a[2][o]} at K = {k}, {b[2][o]} at K = {k2}"
    at_a = dict(zip(ta[:-1], va[:-1]))
    for token, value in zip(tb[:-1], vb[:-1]):
        if token in at_a and ulps_apart(at_a[token], value):
            return f"output row {o}: token {token} has {at_a[token]!r} at K = {k}, {value!r} at K = {k2}"
    (small_k, small), (large_k, large) = sorted([(k, (ta, va)), (k2, (tb, vb))], key=lambda pair: pair[0])
    kept = dict(zip(large[0][:-1], large[1][:-1]))
    boundary = [v for v in kept.values() if v == v]
    for token, value in zip(small[0][:-1], small[1][:-1]):
        if token not in kept and not (boundary and ulps_apart(value, min(boundary)) == 0):
            return (f"output row {o}: token {token} ({value!r}) is among the top {small_k} but not among the top "
                    f"{large_k}, and ties none of them")
    return None


def _show(row):
    tokens, values, rank = row
    return f"tokens {tokens}, values {[float(f'{v:.9g}') for v in values]}" + ("" if rank is None else f", rank {rank}")


def _where(name):
    return {"repeat": "called again", "batch": "in another batch", "layout": "at another stride and alignment"}[name]


def check_invariance(kernel: Callable, *, k: int, seed: int, cases: int, vocab=None, dtype=None, ranks=None,
                     temperatures=None, offsets=None, ulps: float = 0, ks: Optional[Sequence[int]] = None,
                     properties: Sequence[str] = PROPERTIES, shrink: bool = True,
                     replay_dir: Optional[str] = None) -> InvarianceReport:
    """Calls kernel(batch, k) on `cases` random cases (random_batches' seeds and generators: vocab,
    dtype, offsets and temperatures as in Options) and on the variants of each, and compares each
    output row's bits (values within `ulps`). ks: the K the kernel takes (its other-K variants are
    chosen among them); properties: the variants to try; ranks: True demands ranks of every result
    (they are compared whenever a result has them). The first case that breaks a property is
    shrunk (shrink=True) and written to replay_dir (default: a new temporary folder) as the case's
    and the variant's batch and result files."""
    unknown = set(properties) - set(PROPERTIES)
    if unknown:
        raise ValueError(f"unknown properties {sorted(unknown)} (known: {', '.join(PROPERTIES)})")
    options = Options(dtype, vocab, offsets, temperatures)
    report = InvarianceReport()
    checker = Checker(kernel, ulps, ranks, report)
    for index in range(cases):
        case = draw_case(seed, index, cases, k, ranks, None, options)
        report.cases += 1
        neighbours = case.seed & 0xFFFF  # the seed of the rows put around the case's
        found = checker.breaks(case.batch, case.k, ks, properties, neighbours)
        for name, detail in found.items():
            if any(f.property == name for f in report.findings):
                continue
            if shrink:  # the shrink's calls are not the run's: a scratch checker makes them
                scratch = Checker(kernel, ulps, ranks, InvarianceReport())
                smaller, _, _ = find_counterexample(case.seed, case.size, lambda b: name in scratch.breaks(
                    b, case.k, ks, (name,), neighbours), options, max_tries=200)
                if smaller is not None:
                    detail = scratch.breaks(smaller, case.k, ks, (name,), neighbours)[name]
            replay_dir = replay_dir or tempfile.mkdtemp(prefix="logprobs-invariance-")
            report.findings.append(_written(name, case.seed, detail, replay_dir))
    return report


def _written(name, seed, detail, folder):
    rows, ulps, message, batch, variant, variant_result, base, k, pairs = detail
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"invariance-{name}-{seed}")
    paths = (f"{stem}-batch.safetensors", f"{stem}-result.safetensors", f"{stem}-variant-batch.safetensors",
             f"{stem}-variant-result.safetensors")
    files.save_batch(paths[0], batch, k=k)
    files.save_result(paths[1], base, metadata={"k": str(k)})
    files.save_batch(paths[2], variant, k=k)
    files.save_result(paths[3], variant_result, metadata={"k": str(variant_result.top_k)})
    mapping = ",".join(f"{o}:{p}" for o, p in pairs if o in rows)
    replay = shlex.join(module_command("logprobs_harness.invariance") + ["--diff", paths[1], paths[3], "--rows",
                                                                         mapping])
    return InvarianceFinding(name, seed, tuple(rows), ulps, message, paths, replay)


def diff(result_a, result_b, pairs):
    """Lines saying how each pair (row of a, row of b) differs: the whole row where the two
    results have the same width, else what must hold across K."""
    a, b = _rows(result_a, None), _rows(result_b, None)
    lines = []
    for o, p in pairs:
        if result_a.columns == result_b.columns and result_a.layout == result_b.layout:
            ra = (a[0][o], a[1][o], None if a[2] is None else a[2][o])
            rb = (b[0][p], b[1][p], None if b[2] is None else b[2][p])
            if _row_distance(ra, rb):
                lines.append(f"row {o} / row {p}: {_show(ra)}; {_show(rb)} ({_row_distance(ra, rb):g} ulps apart)")
        else:
            moved = (_k_difference(a, b, o, result_a.top_k, result_b.top_k) if o == p
                     else f"row {o} / row {p}: results of different K compare a row with itself")
            if moved:
                lines.append(moved)
    return lines


def main(argv=None):
    """python3 -m logprobs_harness.invariance: a backend of this build through check_invariance,
    or --diff: how the rows of two result files differ (a finding's files). Exit 0 invariant (no
    difference), 1 findings (differences), 2 bad usage."""
    import argparse

    from ._native import LogprobsError
    from .judging import backends, run

    parser = argparse.ArgumentParser(prog="python3 -m logprobs_harness.invariance", description=main.__doc__)
    parser.add_argument("--backend", help="a backend of this build (logprobs_harness.backends())")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--replay-dir", help="where findings' files go (default: a new temporary folder)")
    parser.add_argument("--diff", nargs=2, metavar=("RESULT_A", "RESULT_B"), help="compare two result files' rows")
    parser.add_argument("--rows", default="", help="with --diff: pairs A_ROW:B_ROW, comma-separated (default: all)")
    args = parser.parse_args(argv)
    if (args.backend is None) == (args.diff is None):
        parser.error("give --backend NAME or --diff RESULT_A RESULT_B")
    if args.diff:
        try:
            a, b = (files.load_result(path) for path in args.diff)
            pairs = [tuple(int(x) for x in pair.split(":")) for pair in args.rows.split(",") if pair] or [
                (o, o) for o in range(min(a.rows, b.rows))]
        except (LogprobsError, ValueError) as e:
            parser.error(str(e))
        if any(not (0 <= o < a.rows and 0 <= q < b.rows) for o, q in pairs):
            parser.error(f"--rows {args.rows}: a row outside {a.rows} and {b.rows} rows")
        lines = diff(a, b, pairs)
        print("\n".join(lines) if lines else f"the {len(pairs)} row pairs have the same bits")
        return 1 if lines else 0
    info = {b.name: b for b in backends()}.get(args.backend)
    if info is None or not info.available:
        parser.error(f"--backend {args.backend}: " + ("unknown" if info is None else info.unavailable_reason))
    if not 0 <= args.k <= 65535 or args.cases < 1:
        parser.error("--k must be in 0..65535 and --cases at least 1")
    ks = None if info.any_k else [2**levels - 1 for levels in range(17)]
    if ks is not None and args.k not in ks:
        parser.error(f"--backend {args.backend} takes K = 2^L - 1, not {args.k}")
    report = check_invariance(lambda batch, k: run(args.backend, batch, k), k=args.k, seed=args.seed,
                              cases=args.cases, ks=ks, dtype=None if info.bf16_logits or info.f16_logits else "f32",
                              temperatures=None if info.temperatures else False, replay_dir=args.replay_dir)
    print(f"{args.backend}: " + report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
