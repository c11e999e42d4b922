"""liblogprobs_c.so through ctypes: finding and loading it, the C structs of
include/logprobs/logprobs.h, the function prototypes, and turning a status and its error object
into a Python exception. Nothing here is compiled against Python, so one build serves every
CPython."""
import ctypes
import numbers
import os
import pathlib

API_VERSION = 4  # the LOGPROBS_API_VERSION this package was written against
LIBRARY_ENV = "LOGPROBS_HARNESS_LIBRARY"
LIBRARY_NAME = "liblogprobs_c.so"

c_u32, c_u64, c_i32, c_i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
c_ptr = ctypes.c_void_p

DTYPES = {0: "f32", 1: "bf16", 2: "f16"}
DTYPE_CODES = {name: code for code, name in DTYPES.items()}
ANY = -1


class LogprobsError(Exception):
    """An error the C API reported: `status` is its code, `status_name` its name."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class InvalidArgument(LogprobsError, ValueError):
    """A bad argument: an option out of range, an array of the wrong size."""


class InvalidBatch(LogprobsError, ValueError):
    """The batch or K breaks SPEC §4; the message names the field, the batch item and the values."""


class UnsupportedPart(LogprobsError, ValueError):
    """The backend lacks an optional part of the contract that the batch needs (SPEC §4)."""


class UnknownBackend(LogprobsError, LookupError):
    """No backend of that name in this build."""


class BackendUnavailable(LogprobsError):
    """The backend cannot run on this machine (no GPU, no such CPU target)."""


class FileError(LogprobsError):
    """A file that cannot be read or written, or is not a well-formed batch or result file."""


class CallbackFailed(LogprobsError):
    """A Python callback the library called raised (the exception is chained)."""


_EXCEPTIONS = {1: InvalidArgument, 2: InvalidBatch, 3: UnsupportedPart, 4: UnknownBackend, 5: BackendUnavailable,
               6: FileError, 7: MemoryError, 8: CallbackFailed}


class BatchView(ctypes.Structure):
    _fields_ = [("logits", c_ptr), ("dtype", c_i32), ("rows", c_u64), ("vocab", c_u64), ("row_stride", c_u64),
                ("tokens", c_ptr), ("tokens_count", c_u64), ("sampled_tokens", c_ptr), ("batch_size", c_u64),
                ("logit_row_offsets", c_ptr), ("logit_row_offsets_count", c_u64),
                ("token_row_offsets", c_ptr), ("token_row_offsets_count", c_u64),
                ("lp_output_offsets", c_ptr), ("lp_output_offsets_count", c_u64),
                ("has_temperatures", c_i32), ("temperatures", c_ptr), ("temperatures_count", c_u64)]


class ResultView(ctypes.Structure):
    _fields_ = [("layout", c_i32), ("rows", c_u64), ("columns", c_u64), ("lp_logits", c_ptr), ("lp_tokens", c_ptr),
                ("top_tokens", c_ptr), ("top_logprobs", c_ptr), ("sampled_logprobs", c_ptr), ("has_ranks", c_i32),
                ("ranks", c_ptr)]


class BackendInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("description", ctypes.c_char_p), ("available", c_i32),
                ("unavailable_reason", ctypes.c_char_p), ("variant_of", ctypes.c_char_p),
                ("bf16_logits", c_i32), ("f16_logits", c_i32), ("temperatures", c_i32), ("ranks", c_i32),
                ("any_k", c_i32), ("sums_in_one_chain", c_i32), ("claims_canonical_arithmetic", c_i32),
                ("computes_on_host", c_i32)]


SUM_RULES = ("calibrated", "linear", "sqrt")  # LOGPROBS_SUM_CALIBRATED, _LINEAR, _SQRT


class Tolerance(ctypes.Structure):
    _fields_ = [("ulps", ctypes.c_double), ("norm_ulps", ctypes.c_double), ("sigma", ctypes.c_double),
                ("sum_rule", c_i32), ("floor", ctypes.c_double)]


class Violation(ctypes.Structure):
    _fields_ = [("rule", c_i32), ("rule_name", ctypes.c_char_p), ("batch", c_u64), ("output_row", c_u64),
                ("slot", c_u64), ("token", c_u32), ("what", ctypes.c_char_p), ("message", ctypes.c_char_p),
                ("sum_rule", c_i32), ("dev", ctypes.c_double), ("sum_err", ctypes.c_double)]


class RowLocation(ctypes.Structure):
    _fields_ = [("found", c_i32), ("batch", c_u64), ("output_row", c_u64), ("kind", ctypes.c_char_p),
                ("vocab", c_u64), ("top_probability", ctypes.c_double), ("masked", c_u64), ("sum_rule", c_i32),
                ("dev", ctypes.c_double), ("sum_err", ctypes.c_double)]


class Stats(ctypes.Structure):
    _fields_ = [("rows", c_u64), ("values", c_u64), ("max_abs_error", ctypes.c_double),
                ("max_ulp_error", ctypes.c_double), ("max_tolerance_used", ctypes.c_double),
                ("tolerance", Tolerance), ("max_tolerance_row", RowLocation)]


class Diagnosis(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("rows", ctypes.POINTER(c_u64)), ("row_count", c_u64),
                ("evidence", ctypes.c_char_p), ("message", ctypes.c_char_p)]


class RandomOptions(ctypes.Structure):
    _fields_ = [("dtype", c_i32), ("vocab", c_u64), ("offsets", c_i32), ("temperatures", c_i32), ("finite", c_i32)]


FAILS_FN = ctypes.CFUNCTYPE(c_i32, ctypes.POINTER(BatchView), c_ptr)

_ERR = ctypes.POINTER(c_ptr)
_P = ctypes.POINTER
# name: (restype, argtypes); every fallible function ends with its error out-parameter.
_PROTOTYPES = {
    "logprobs_api_version": (c_u32, []),
    "logprobs_error_status": (c_i32, [c_ptr]),
    "logprobs_error_message": (ctypes.c_char_p, [c_ptr]),
    "logprobs_error_free": (None, [c_ptr]),
    "logprobs_status_name": (ctypes.c_char_p, [c_i32]),
    "logprobs_batch_get_view": (None, [c_ptr, _P(BatchView)]),
    "logprobs_batch_k": (c_i64, [c_ptr]),
    "logprobs_batch_free": (None, [c_ptr]),
    "logprobs_output_shape": (c_i32, [_P(BatchView), c_u32, _P(c_u64), _P(c_u64), _ERR]),
    "logprobs_plan_rows": (c_i32, [_P(BatchView), c_u64, c_ptr, c_ptr, c_ptr, _P(c_u64), _ERR]),
    "logprobs_result_get_view": (None, [c_ptr, _P(ResultView)]),
    "logprobs_result_k": (c_i64, [c_ptr]),
    "logprobs_result_free": (None, [c_ptr]),
    "logprobs_backends": (c_i32, [_P(c_ptr), _ERR]),
    "logprobs_backend_list_count": (c_u64, [c_ptr]),
    "logprobs_backend_list_get": (c_i32, [c_ptr, c_u64, _P(BackendInfo), _ERR]),
    "logprobs_backend_list_free": (None, [c_ptr]),
    "logprobs_run": (c_i32, [ctypes.c_char_p, _P(BatchView), c_u32, c_i32, _P(c_ptr), _ERR]),
    "logprobs_reference": (c_i32, [_P(BatchView), c_u32, c_i32, _P(c_ptr), _ERR]),
    "logprobs_tolerance_default": (None, [_P(Tolerance)]),
    "logprobs_rule_name": (ctypes.c_char_p, [c_i32]),
    "logprobs_judge": (c_i32, [_P(BatchView), c_u32, _P(ResultView), _P(Tolerance), _P(c_ptr), _ERR]),
    "logprobs_judge_keeping": (c_i32, [_P(BatchView), c_u32, _P(ResultView), _P(Tolerance), c_u64, _P(c_ptr), _ERR]),
    "logprobs_verdict_ok": (c_i32, [c_ptr]),
    "logprobs_verdict_violation_count": (c_u64, [c_ptr]),
    "logprobs_verdict_violations_found": (c_u64, [c_ptr]),
    "logprobs_verdict_rule_count": (c_u64, [c_ptr, c_i32]),
    "logprobs_verdict_violation": (c_i32, [c_ptr, c_u64, _P(Violation), _ERR]),
    "logprobs_verdict_stats": (None, [c_ptr, _P(Stats)]),
    "logprobs_verdict_diagnosis_count": (c_u64, [c_ptr]),
    "logprobs_verdict_diagnosis": (c_i32, [c_ptr, c_u64, _P(Diagnosis), _ERR]),
    "logprobs_verdict_free": (None, [c_ptr]),
    "logprobs_random_options_default": (None, [_P(RandomOptions)]),
    "logprobs_random_batch": (c_i32, [c_u64, c_i32, _P(RandomOptions), _P(c_ptr), _ERR]),
    "logprobs_hand_case_count": (c_u64, []),
    "logprobs_hand_case": (c_i32, [c_u64, _P(ctypes.c_char_p), _P(c_ptr), _ERR]),
    "logprobs_random_k": (c_i32, [c_u64, _P(c_u32), _ERR]),
    "logprobs_find_counterexample": (c_i32, [c_u64, c_i32, _P(RandomOptions), FAILS_FN, c_ptr, c_i32, _P(c_ptr),
                                             _P(c_i32), _ERR]),
    "logprobs_load_batch": (c_i32, [ctypes.c_char_p, _P(c_ptr), _ERR]),
    "logprobs_load_result": (c_i32, [ctypes.c_char_p, _P(c_ptr), _ERR]),
    "logprobs_batch_metadata_count": (c_u64, [c_ptr]),
    "logprobs_batch_metadata": (None, [c_ptr, c_u64, _P(ctypes.c_char_p), _P(ctypes.c_char_p)]),
    "logprobs_result_metadata_count": (c_u64, [c_ptr]),
    "logprobs_result_metadata": (None, [c_ptr, c_u64, _P(ctypes.c_char_p), _P(ctypes.c_char_p)]),
    "logprobs_save_batch": (c_i32, [ctypes.c_char_p, _P(BatchView), c_i64, c_ptr, c_ptr, c_u64, _ERR]),
    "logprobs_save_result": (c_i32, [ctypes.c_char_p, _P(ResultView), c_ptr, c_ptr, c_u64, _ERR]),
}


def library_candidates():
    """Where the library is looked for: $LOGPROBS_HARNESS_LIBRARY when set, else beside this file."""
    chosen = os.environ.get(LIBRARY_ENV)
    return [pathlib.Path(chosen)] if chosen else [pathlib.Path(__file__).resolve().with_name(LIBRARY_NAME)]


def _load():
    tried = []
    for path in library_candidates():
        if not path.is_file():
            tried.append(f"{path} (no such file)")
            continue
        try:
            library = ctypes.CDLL(str(path))
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(library, name)
            function.restype, function.argtypes = restype, argtypes
        version = library.logprobs_api_version()
        if version != API_VERSION:
            raise ImportError(f"logprobs_harness: {path} implements C API version {version}, this package needs "
                              f"{API_VERSION}: rebuild the package and the library together")
        return library, path
    raise ImportError(f"logprobs_harness: cannot load {LIBRARY_NAME}; tried {'; '.join(tried)}. Build the project "
                      f"(cmake --build --preset release puts the package and its library in build/release/python) "
                      f"or point {LIBRARY_ENV} at the library")


lib, library_path = _load()


MAX_K = 65535  # SPEC §1


def checked_k(k, name="k"):
    """K as the C API takes it (uint32_t), checked first: ctypes would take it modulo 2^32, so
    2**32 + 5 would judge at K = 5."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= k <= MAX_K:
        raise InvalidArgument(f"{name} must be a whole number in 0..{MAX_K}, got {k!r}")
    return int(k)


def checked_limit(limit, name="limit"):
    """A number of violations to keep (uint64_t): a whole number >= 0, checked before ctypes would
    take it modulo 2^64."""
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or not 0 <= limit < 2**64:
        raise InvalidArgument(f"{name} must be a whole number in 0..2**64 - 1, got {limit!r}")
    return int(limit)


def checked_count(count, name="count"):
    """A number of cases: a whole number >= 1 (zero cases would pass having checked nothing)."""
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise InvalidArgument(f"{name} must be a whole number >= 1, got {count!r}")
    return int(count)


def text(raw):
    return raw.decode("utf-8", "replace") if raw is not None else ""


def call(function, *args):
    """Calls a fallible C API function (its error out-parameter appended) and raises its error."""
    error = c_ptr()
    status = function(*args, ctypes.byref(error))
    if status != 0:
        message = text(lib.logprobs_error_message(error)) if error.value else "(no message: out of memory)"
        lib.logprobs_error_free(error)
        raise _EXCEPTIONS.get(status, LogprobsError)(message, status, text(lib.logprobs_status_name(status)))


def address(buffer):
    """The address of a bytearray's first byte (None when empty: the C API takes NULL with count 0)."""
    if not buffer:
        return None
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


def copy_out(pointer, nbytes):
    """`nbytes` bytes at a C address, copied into a new bytearray."""
    buffer = bytearray(nbytes)
    if nbytes:
        ctypes.memmove((ctypes.c_char * nbytes).from_buffer(buffer), pointer, nbytes)
    return buffer
