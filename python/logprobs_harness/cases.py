"""Random cases from the harness's generators (fuzz/generators.hpp, the ones the campaign draws
from), and shrinking a failing one with RapidCheck's shrinks through a Python predicate."""
import ctypes

from . import _buffers, _native
from ._native import call, lib
from .batch import Batch

_OFFSETS = {"no_echo": 0, "echo": 1, "arbitrary": 2}


class Options:
    """What the generator may not choose: dtype ('f32', 'bf16', 'f16'), vocab (V, 1..2^24),
    offsets ('no_echo', 'echo', 'arbitrary'), temperatures (True: always, False: never) and
    finite (no NaN, infinity or -inf mask in any row a kernel reads). None leaves it drawn."""

    __slots__ = ("dtype", "vocab", "offsets", "temperatures", "finite")

    def __init__(self, dtype=None, vocab=None, offsets=None, temperatures=None, finite=False):
        self.dtype = None if dtype is None else _buffers.dtype_name(dtype)
        if offsets is not None and offsets not in _OFFSETS:
            raise ValueError(f"offsets must be one of {', '.join(_OFFSETS)}, got {offsets!r}")
        self.vocab, self.offsets, self.temperatures, self.finite = vocab, offsets, temperatures, bool(finite)

    def c_options(self):
        o = _native.RandomOptions()
        lib.logprobs_random_options_default(ctypes.byref(o))
        if self.dtype is not None:
            o.dtype = _native.DTYPE_CODES[self.dtype]
        if self.vocab is not None:
            o.vocab = int(self.vocab)
        if self.offsets is not None:
            o.offsets = _OFFSETS[self.offsets]
        if self.temperatures is not None:
            o.temperatures = int(bool(self.temperatures))
        o.finite = int(self.finite)
        return o

    def __repr__(self):
        fixed = {name: getattr(self, name) for name in self.__slots__ if getattr(self, name) not in (None, False)}
        return f"Options({', '.join(f'{k}={v!r}' for k, v in fixed.items())})"


def random_batch(seed, size=50, options=None):
    """The batch the generators draw from `seed` at `size` (0..100, which scales B, V and rows):
    the same seed, size and options give the same batch."""
    handle = _native.c_ptr()
    c_options = (options or Options()).c_options()
    call(lib.logprobs_random_batch, seed, size, ctypes.byref(c_options), ctypes.byref(handle))
    return Batch._from_handle(handle)


def random_k(seed):
    """A K the generators draw (MAX's 2^L - 1, 5, 20, small ones, any up to 65535)."""
    k = _native.c_u32()
    call(lib.logprobs_random_k, seed, ctypes.byref(k))
    return k.value


def hand_cases():
    """The campaign's hand cases, [(name, Batch)]: one small batch per SPEC situation (NaN, +inf
    and -inf rows, ties, echo, 16-bit logits, temperatures...), each valid at every K."""
    found = []
    for index in range(lib.logprobs_hand_case_count()):
        name, handle = ctypes.c_char_p(), _native.c_ptr()
        call(lib.logprobs_hand_case, index, ctypes.byref(name), ctypes.byref(handle))
        found.append((_native.text(name.value), Batch._from_handle(handle)))
    return found


def case_seed(seed, index):
    """The seed of case `index` of a run with `seed` (splitmix64, as the campaign derives them)."""
    mask = 2**64 - 1
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


class Case:
    """One random case: a batch, its K, whether ranks are asked for, and where it came from (the
    case seed and size, and the options, from which the same batch is drawn again and shrunk)."""

    def __init__(self, batch, k, ranks, seed=None, size=None, options=None, index=None):
        self.batch, self.k, self.ranks = batch, k, ranks
        self.seed, self.size, self.options, self.index = seed, size, options or Options(), index

    def with_batch(self, batch):
        """The same case on another batch (a shrunk one)."""
        return Case(batch, self.k, self.ranks, self.seed, self.size, self.options, self.index)

    def assert_agrees(self, result=None, **judging):
        """assert_agrees(self.batch, self.k, ...)."""
        __tracebackhide__ = True
        from .judging import assert_agrees

        return assert_agrees(self.batch, self.k, result, **judging)

    def describe(self):
        origin = f"case seed {self.seed}, size {self.size}" if self.seed is not None else "a given batch"
        return f"K = {self.k}{', ranks' if self.ranks else ''}, {self.batch.describe()} ({origin})"

    def __repr__(self):
        return f"<logprobs_harness.Case {self.describe()}>"


def random_batches(seed, count, *, k=20, ranks=None, sizes=None, dtype=None, vocab=None, offsets=None,
                   temperatures=None, finite=False):
    """`count` random cases from `seed`. k: an int, a sequence (case i takes k[i % len]) or
    'random' (drawn by the generators); ranks: True, False or None (each case draws it, as the
    campaign does); sizes: the generator's size per case (default: spread over 0..100, small
    cases first). The other options fix what the generator may not choose (see Options)."""
    options = Options(dtype, vocab, offsets, temperatures, finite)
    count = _native.checked_count(count)
    return [draw_case(seed, index, count, k, ranks, sizes, options) for index in range(count)]


def draw_case(seed, index, count, k=20, ranks=None, sizes=None, options=None):
    """Case `index` of random_batches(seed, count, ...), drawn alone."""
    s = case_seed(seed, index)
    size = sizes[index % len(sizes)] if sizes else (100 if count == 1 else index * 100 // (count - 1))
    if isinstance(k, str) and k == "random":
        case_k = random_k(s)
    elif isinstance(k, (list, tuple, range)):
        case_k = _native.checked_k(list(k)[index % len(k)])
    else:
        case_k = _native.checked_k(k)
    case_ranks = bool(s >> 63) if ranks is None else bool(ranks)
    return Case(random_batch(s, size, options), case_k, case_ranks, s, size, options, index)


def find_counterexample(seed, size, fails, options=None, max_tries=1000):
    """Draws the batch of (seed, size, options); if fails(batch) is true for it, shrinks it with
    RapidCheck's shrinks (fewer batch items and rows, smaller V, plainer values, no injected
    specials) while fails keeps being true, and returns (smallest batch, shrink steps, calls of
    fails); (None, 0, 1) when the drawn batch passes. An exception in `fails` stops the search
    and is raised here."""
    raised, calls = [], [0]

    def predicate(view, _):
        calls[0] += 1
        try:
            return 1 if fails(Batch._from_view(view.contents)) else 0
        except BaseException as e:  # noqa: B036 - handed back to the caller below, never lost
            raised.append(e)
            return -1

    callback = _native.FAILS_FN(predicate)
    handle, steps = _native.c_ptr(), _native.c_i32()
    c_options = (options or Options()).c_options()
    try:
        call(lib.logprobs_find_counterexample, seed, size, ctypes.byref(c_options), callback, None, max_tries,
             ctypes.byref(handle), ctypes.byref(steps))
    except _native.CallbackFailed as e:
        if raised:
            raise raised[0] from None  # the caller's own exception, with its own traceback
        raise
    if not handle.value:
        return None, 0, calls[0]
    return Batch._from_handle(handle), steps.value, calls[0]
