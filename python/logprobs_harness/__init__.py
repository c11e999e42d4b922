"""logprobs_harness: the logprobs-harness judge inside Python test suites.

Judges any implementation of the logprobs / top_logprobs kernel (PyTorch, Triton, a server's
output) against the contract (SPEC.md) through the C API (liblogprobs_c.so, loaded with ctypes,
so one build serves every CPython 3.8+; numpy and torch are optional):

    batch = Batch(logits, sampled_tokens)                 # any buffer or tensor
    report = judge(batch, k, top_tokens=..., top_logprobs=..., sampled_logprobs=..., ranks=...)
    assert_agrees(batch, k, lp_logits=..., lp_tokens=...) # AssertionError with replay files
    for case in random_batches(seed=1, count=20, k=20): ...

The pytest plugin (logprobs_harness.pytest_plugin) gives tests a `logprobs_case` fixture of
random cases and shrinks a failing one before it is reported.
"""
from ._native import (API_VERSION, BackendUnavailable, CallbackFailed, FileError, InvalidArgument, InvalidBatch,
                      LogprobsError, UnknownBackend, UnsupportedPart, library_path)
from .batch import Batch, Plan
from .cases import (Case, Options, case_seed, find_counterexample, hand_cases, random_batch, random_batches,
                    random_k)
from .files import load_batch, load_result, save, save_batch, save_result
from .judging import (DEFAULT_TOLERANCE, BackendInfo, Diagnosis, Disagreement, Report, RowLocation, Tolerance, Violation,
                      assert_agrees, backends, judge, reference, replay_commands, run)
from .result import Result


def __getattr__(name):
    """check_invariance and its report, imported on first use (so `python3 -m
    logprobs_harness.invariance` runs the module once)."""
    if name in ("check_invariance", "InvarianceReport", "InvarianceFinding"):
        from . import invariance

        return getattr(invariance, name)
    raise AttributeError(f"module 'logprobs_harness' has no attribute {name!r}")


try:
    from ._version import version as __version__  # written by the build beside the library
except ImportError:
    __version__ = "0+unknown"

__all__ = [
    "API_VERSION", "BackendInfo", "BackendUnavailable", "Batch", "CallbackFailed", "Case", "DEFAULT_TOLERANCE",
    "Diagnosis", "Disagreement", "FileError", "InvalidArgument", "InvalidBatch", "InvarianceFinding",
    "InvarianceReport", "LogprobsError", "Options", "Plan", "Report", "Result", "RowLocation", "Tolerance",
    "UnknownBackend", "UnsupportedPart", "Violation", "assert_agrees", "backends", "case_seed", "check_invariance",
    "find_counterexample", "hand_cases", "judge", "library_path", "load_batch", "load_result", "random_batch",
    "random_batches", "random_k", "reference", "replay_commands", "run", "save", "save_batch", "save_result",
]
