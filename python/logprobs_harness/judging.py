"""Backends, the reference, and judging any implementation's result against the input and the
reference (SPEC §5, §6) through the harness's one comparator; assert_agrees for tests, whose
failure carries the files and the logprobs-check command that replay it."""
import collections
import contextvars
import ctypes
import functools
import hashlib
import os
import shlex
import sys
import tempfile

from . import _native, files
from ._native import call, lib
from .batch import Batch
from .result import Result

BackendInfo = collections.namedtuple(
    "BackendInfo", "name description available unavailable_reason variant_of bf16_logits f16_logits temperatures "
                   "ranks any_k sums_in_one_chain claims_canonical_arithmetic computes_on_host")
Tolerance = collections.namedtuple("Tolerance", "ulps norm_ulps sum_rule sigma floor")
# A broken rule, located, with its row's summation term (sum_rule, dev, sum_err: SPEC §5).
Violation = collections.namedtuple("Violation", "rule batch row slot token what message sum_rule dev sum_err")
# The row a figure was reached on: where, its kind ("confident", "masked", "flat", "spread") and
# its summation term.
RowLocation = collections.namedtuple("RowLocation", "batch row kind vocab top_probability masked sum_rule dev sum_err")
# What the diagnosis names on a failing result (docs/logprobs-check.md, "The diagnosis"): a class
# of kernel bug by its stable name ("normalizer_shift", ..., "rank_strict"), the output rows it
# explains (ascending) and one sentence of evidence.
Diagnosis = collections.namedtuple("Diagnosis", "name rows evidence")

# While a test is being shrunk, its failures write no replay files (set by the pytest plugin).
replay_files_enabled = contextvars.ContextVar("logprobs_harness_replay_files", default=True)
# Where assert_agrees writes them when not told: the plugin's folder, else $LOGPROBS_HARNESS_REPLAY_DIR.
default_replay_dir = contextvars.ContextVar("logprobs_harness_replay_dir", default=None)
_DEFAULTS = _native.Tolerance()
lib.logprobs_tolerance_default(ctypes.byref(_DEFAULTS))


def _tolerance_from_c(t):
    return Tolerance(t.ulps, t.norm_ulps, _native.SUM_RULES[t.sum_rule], t.sigma, t.floor)


DEFAULT_TOLERANCE = _tolerance_from_c(_DEFAULTS)


def backends():
    """Every backend of this build (the reference first), with the optional parts it implements."""
    handle = _native.c_ptr()
    call(lib.logprobs_backends, ctypes.byref(handle))
    try:
        found = []
        for i in range(lib.logprobs_backend_list_count(handle)):
            info = _native.BackendInfo()
            call(lib.logprobs_backend_list_get, handle, i, ctypes.byref(info))
            found.append(BackendInfo(*(_native.text(getattr(info, f)) if isinstance(getattr(info, f), bytes)
                                       else bool(getattr(info, f)) for f, _ in _native.BackendInfo._fields_)))
        return found
    finally:
        lib.logprobs_backend_list_free(handle)


def reference(batch, k, ranks=False):
    """The reference's result (the contract's answer) for the batch at top-K width k."""
    handle = _native.c_ptr()
    call(lib.logprobs_reference, ctypes.byref(batch.view), _native.checked_k(k), int(bool(ranks)),
         ctypes.byref(handle))
    return Result._from_handle(handle)


def run(backend, batch, k, ranks=False):
    """The named backend's result for the batch (UnsupportedPart when it lacks a part the batch
    needs, BackendUnavailable when it cannot run here)."""
    handle = _native.c_ptr()
    call(lib.logprobs_run, str(backend).encode(), ctypes.byref(batch.view), _native.checked_k(k), int(bool(ranks)),
         ctypes.byref(handle))
    return Result._from_handle(handle)


class Report:
    """The verdict on one result: `ok`, the violations (each with its rule, batch, output row,
    slot, token, message and its row's summation term; the first `limit` kept, `violation_count`
    all of them counted, `rules` how many broke each rule), and the largest errors against the
    reference with the share of the tolerance used and the row it was reached on (`tolerance_row`,
    None when no finite value was compared); `diagnoses`, what the diagnosis names when it failed
    (a list of Diagnosis(name, rows, evidence), empty when it agrees or no failing row fits a
    class of bug)."""

    def __init__(self, verdict):
        stats = _native.Stats()
        lib.logprobs_verdict_stats(verdict, ctypes.byref(stats))
        self.ok = bool(lib.logprobs_verdict_ok(verdict))
        self.violation_count = lib.logprobs_verdict_violations_found(verdict)
        self.rules = collections.Counter({name: lib.logprobs_verdict_rule_count(verdict, i)
                                          for i, name in enumerate(_RULE_NAMES)
                                          if lib.logprobs_verdict_rule_count(verdict, i)})
        self.violations = []
        for i in range(lib.logprobs_verdict_violation_count(verdict)):
            v = _native.Violation()
            call(lib.logprobs_verdict_violation, verdict, i, ctypes.byref(v))
            self.violations.append(Violation(_native.text(v.rule_name), v.batch, v.output_row, v.slot, v.token,
                                             _native.text(v.what), _native.text(v.message),
                                             _native.SUM_RULES[v.sum_rule], v.dev, v.sum_err))
        self.diagnoses = []
        for i in range(lib.logprobs_verdict_diagnosis_count(verdict)):
            d = _native.Diagnosis()
            call(lib.logprobs_verdict_diagnosis, verdict, i, ctypes.byref(d))
            self.diagnoses.append(Diagnosis(_native.text(d.name), [d.rows[j] for j in range(d.row_count)],
                                            _native.text(d.evidence)))
        self.rows, self.values = stats.rows, stats.values
        self.max_abs_error, self.max_ulp_error = stats.max_abs_error, stats.max_ulp_error
        self.tolerance_used = stats.max_tolerance_used
        self.tolerance = _tolerance_from_c(stats.tolerance)
        at = stats.max_tolerance_row
        self.tolerance_row = RowLocation(at.batch, at.output_row, _native.text(at.kind), at.vocab, at.top_probability,
                                         at.masked, _native.SUM_RULES[at.sum_rule], at.dev,
                                         at.sum_err) if at.found else None

    def __bool__(self):
        return self.ok

    def summary(self):
        count = self.violation_count
        head = "agrees" if self.ok else f"{count} violation{'s' if count != 1 else ''} ({_rules_text(self.rules)})"
        rows = f"{self.rows} row{'' if self.rows == 1 else 's'}"
        where = f" on a {self.tolerance_row.kind} row" if self.tolerance_row else ""
        return (f"{head}; {rows}, largest error {self.max_abs_error:.3g} ({self.max_ulp_error:.3g} ulp), "
                f"tolerance used {self.tolerance_used:.3g}{where} (at most 1 passes; {self.tolerance.sum_rule} "
                f"sum rule)")

    def __repr__(self):
        return f"<logprobs_harness.Report {self.summary()}>"


# The rules in the C API's order (LOGPROBS_RULE_SHAPE ... LOGPROBS_RULE_GREEDY_EXACT).
_RULE_NAMES = tuple(_native.text(lib.logprobs_rule_name(i)) for i in range(10))


def _rules_text(rules):
    return ", ".join(f"{rule}: {count}" for rule, count in sorted(rules.items()))


def _result_from(result, k, layout_arrays):
    given = {name: value for name, value in layout_arrays.items() if value is not None}
    if result is not None:
        if given:
            raise TypeError("give a Result or its arrays, not both")
        return result
    packed = {"lp_logits", "lp_tokens", "lp_ranks"} & given.keys()
    split = {"top_tokens", "top_logprobs", "sampled_logprobs", "ranks"} & given.keys()
    if packed and split - {"ranks"}:
        raise TypeError("give the arrays of one layout: lp_logits/lp_tokens, or top_tokens/top_logprobs/"
                        "sampled_logprobs")
    if packed:
        if "ranks" in given:
            raise TypeError("the packed layout's ranks are lp_ranks=")
        return Result.packed(given.get("lp_logits"), given.get("lp_tokens"), given.get("lp_ranks"), k=k)
    missing = {"top_tokens", "top_logprobs", "sampled_logprobs"} - given.keys()
    if missing:
        raise TypeError(f"a result needs lp_logits and lp_tokens, or top_tokens, top_logprobs and sampled_logprobs "
                        f"(missing {', '.join(sorted(missing))})")
    return Result.split(given["top_tokens"], given["top_logprobs"], given["sampled_logprobs"], given.get("ranks"),
                        k=k)


def judge(batch, k, result=None, *, lp_logits=None, lp_tokens=None, lp_ranks=None, top_tokens=None,
          top_logprobs=None, sampled_logprobs=None, ranks=None, ulps=None, norm_ulps=None, sum_rule=None, sigma=None,
          floor=None, linear_sum=None, limit=10000):
    """Judges a result for the batch at top-K width k (a Result, or the arrays of one layout)
    against the input and the reference: tokens exact and tie-aware, ranks exact when given,
    greedy-exactness, values within |v - ref| <= ulps * ulp(ref) + norm_ulps * ulp(|m| + log V) +
    sum_err(row) (SPEC §5). sum_rule: "calibrated" (the default: max(sigma * dev, floor * 2^-24),
    dev the drift of honest f32 sums on the row), "linear" (V * 2^-24, a kernel that sums in one f32
    chain, as MAX's does; linear_sum=True says the same) or "sqrt" (contract v2's sigma * sqrt(V) *
    2^-24). A term left out is the default: the tolerance comes from these arguments alone, never
    from the result or its file. Every violation is counted (Report.violation_count, .rules); the
    first `limit` are kept (Report.violations), each a few hundred bytes. Returns a Report."""
    k = _native.checked_k(k)
    got = _result_from(result, k, {"lp_logits": lp_logits, "lp_tokens": lp_tokens, "lp_ranks": lp_ranks,
                                   "top_tokens": top_tokens, "top_logprobs": top_logprobs,
                                   "sampled_logprobs": sampled_logprobs, "ranks": ranks})
    tolerance = tolerance_of(ulps, norm_ulps, sum_rule, sigma, floor, linear_sum)
    # A result of another K is the caller's mistake, not the kernel's (a packed width 0 has no K:
    # the shape rule says so).
    if got.top_k != k and (got.layout == "split" or got.columns):
        name = "lp_logits" if got.layout == "packed" else "top_tokens"
        raise _native.InvalidArgument(f"{name} is [{got.rows}, {got.columns}]: K = {got.top_k}, k={k} given (a "
                                      f"result of another K is not judged at this one)")
    view, verdict = got.view(), _native.c_ptr()
    c_tolerance = _native.Tolerance(tolerance.ulps, tolerance.norm_ulps, tolerance.sigma,
                                    _native.SUM_RULES.index(tolerance.sum_rule), tolerance.floor)
    call(lib.logprobs_judge_keeping, ctypes.byref(batch.view), k, ctypes.byref(view), ctypes.byref(c_tolerance),
         _native.checked_limit(limit), ctypes.byref(verdict))
    try:
        report = Report(verdict)
    finally:
        lib.logprobs_verdict_free(verdict)
    report.result = got
    return report


def tolerance_of(ulps=None, norm_ulps=None, sum_rule=None, sigma=None, floor=None, linear_sum=None):
    """The Tolerance these terms make, each left out (None) the default's."""
    if linear_sum is not None and not isinstance(linear_sum, bool):
        raise TypeError(f"linear_sum must be True or False, got {linear_sum!r}")
    if linear_sum and sum_rule not in (None, "linear"):
        raise ValueError(f"linear_sum=True is sum_rule='linear', which sum_rule={sum_rule!r} contradicts")
    rule = "linear" if linear_sum else (DEFAULT_TOLERANCE.sum_rule if sum_rule is None else sum_rule)
    if rule not in _native.SUM_RULES:
        raise ValueError(f"sum_rule must be one of {', '.join(_native.SUM_RULES)}, got {rule!r}")
    d = DEFAULT_TOLERANCE
    return Tolerance(d.ulps if ulps is None else float(ulps), d.norm_ulps if norm_ulps is None else float(norm_ulps),
                     rule, d.sigma if sigma is None else float(sigma), d.floor if floor is None else float(floor))


def diagnosis_lines(diagnoses):
    """"diagnosis: <name>: <evidence>", one line each, as logprobs-check prints them."""
    return [f"diagnosis: {d.name}: {d.evidence}" for d in diagnoses]


class Disagreement(AssertionError):
    """A result that breaks the contract: the report, the batch and result files written for it
    (None while a test is being shrunk) and the logprobs-check commands that replay it;
    `diagnoses`, the report's. Its message is the headline, then the diagnosis, then the
    violations and the replay files."""

    def __init__(self, message, report, batch, k, batch_path=None, result_path=None, commands=()):
        super().__init__(message)
        self.report, self.batch, self.k = report, batch, k
        self.batch_path, self.result_path, self.commands = batch_path, result_path, list(commands)

    @property
    def diagnoses(self):
        return self.report.diagnoses


def check_program():
    """How replay commands name logprobs-check: $LOGPROBS_CHECK, else the bare name."""
    return os.environ.get("LOGPROBS_CHECK", "logprobs-check")


def module_command(module):
    """The words that run `python3 -m module` as pasted in any shell and folder: this interpreter,
    with the folder this package was imported from on PYTHONPATH."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return ["env", f"PYTHONPATH={root}", sys.executable, "-m", module]


def tolerance_flags(tolerance, one_chain_implied=False):
    """The options that give logprobs-check this tolerance (those that differ from the default);
    the linear rule is left out where the command implies it (compare of a one-chain backend)."""
    flags = []
    for name, value, default in (("--ulps", tolerance.ulps, DEFAULT_TOLERANCE.ulps),
                                 ("--norm-ulps", tolerance.norm_ulps, DEFAULT_TOLERANCE.norm_ulps)):
        if value != default:
            flags += [name, repr(float(value))]  # repr: the shortest text that reads back as the same double
    if tolerance.sum_rule != DEFAULT_TOLERANCE.sum_rule and not (one_chain_implied and tolerance.sum_rule == "linear"):
        flags += ["--sum-rule", tolerance.sum_rule]
    for name, value, default in (("--sigma", tolerance.sigma, DEFAULT_TOLERANCE.sigma),
                                 ("--floor", tolerance.floor, DEFAULT_TOLERANCE.floor)):
        if value != default:
            flags += [name, repr(float(value))]
    return flags


@functools.lru_cache(maxsize=None)
def _one_chain_backends():
    """The backends that `compare` judges by the linear rule (they declare one f32 chain): fixed
    for a build, so listed once."""
    return frozenset(b.name for b in backends() if b.sums_in_one_chain)


def _one_chain(backend):
    return bool(backend) and backend in _one_chain_backends()


def replay_commands(batch_path, result_path, k, tolerance, backend=None, ranks=False):
    """`verify` judges the written result again; for a backend's result, `compare` reruns it."""
    program = check_program()
    commands = [shlex.join([program, "verify", "--input", str(batch_path), "--result", str(result_path), "--k",
                            str(k)] + tolerance_flags(tolerance))]
    if backend and backend != "reference":
        commands.append(shlex.join([program, "compare", "--input", str(batch_path), "--k", str(k)]
                                   + (["--ranks"] if ranks else []) + tolerance_flags(tolerance, _one_chain(backend))
                                   + ["--backends", backend]))
    return commands


def _replay_dir(replay_dir):
    chosen = replay_dir or default_replay_dir.get() or os.environ.get("LOGPROBS_HARNESS_REPLAY_DIR")
    if chosen:
        os.makedirs(chosen, exist_ok=True)
        return chosen
    return tempfile.mkdtemp(prefix="logprobs-replay-")


def _replay_digest(batch, k, result):
    """12 hex digits of SHA-256 over every input of a verdict: the batch's shape, dtype and each
    of its arrays (offsets and temperatures too), K, and the result's layout, shape and arrays
    (ranks too), each array framed by its name and length, so that two failures share replay
    files only when they are the same failure."""
    digest = hashlib.sha256(repr((batch.dtype, batch.rows, batch.vocab, batch.row_stride, k, result.layout,
                                  result.rows, result.columns)).encode())
    arrays = {"logits": batch._logits, "sampled_tokens": batch._sampled, "tokens": batch._tokens,
              "logit_row_offsets": batch._lro, "token_row_offsets": batch._tro, "lp_output_offsets": batch._loo,
              "temperatures": batch._temperatures, **result._arrays, "ranks": result._ranks}
    for name, array in arrays.items():
        data = b"" if array is None else bytes(array.data)
        digest.update(f"{name}:{'absent' if array is None else len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def assert_agrees(batch, k, result=None, *, replay_dir=None, shown=5, **judging):
    """judge(batch, k, ...) and the Report when it agrees; else raises Disagreement (an
    AssertionError) with the first `shown` violations, the batch and result written to
    replay_dir, and the logprobs-check commands that replay the verdict."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's
    report = judge(batch, k, result, **judging)
    if report.ok:
        return report
    got = report.result
    lines = [f"logprobs disagree with the contract at K = {k} on {batch.describe()}: {report.summary()}"]
    lines += [f"  {line}" for line in diagnosis_lines(report.diagnoses)]
    lines += [f"  {v.rule}: {v.message}" for v in report.violations[:shown]]
    if report.violation_count > shown:
        lines.append(f"  ... and {report.violation_count - shown} more")
    batch_path = result_path = None
    commands = []
    if replay_files_enabled.get():
        # The verdict comes first: files that cannot be written are said in the message, never
        # raised in its place.
        try:
            folder = _replay_dir(replay_dir)
            digest = _replay_digest(batch, k, got)
            batch_path = os.path.join(folder, f"disagreement-{digest}-batch.safetensors")
            result_path = os.path.join(folder, f"disagreement-{digest}-result.safetensors")
            files.save_batch(batch_path, batch, k=k, metadata={"origin": "logprobs_harness.assert_agrees"})
            files.save_result(result_path, got,
                              metadata={"k": str(k), **({"backend": got.backend} if got.backend else {})})
        except (OSError, _native.LogprobsError) as e:
            batch_path = result_path = None
            lines.append(f"  replay files not written: {e}")
        else:
            commands = replay_commands(batch_path, result_path, k, report.tolerance, got.backend,
                                       got.ranks is not None)
            lines += [f"  batch: {batch_path}", f"  result: {result_path}"] + [f"  replay: {c}" for c in commands]
    raise Disagreement("\n".join(lines), report, batch, k, batch_path, result_path, commands)
