"""A result in either layout of SPEC §7, owning copies of its arrays: packed (lp_logits and
lp_tokens [N, K + 1], what MAX and the backends emit) or split (top_tokens and top_logprobs
[N, K] plus sampled_logprobs [N], what vLLM, SGLang and TensorRT-LLM return); ranks [N] in
either."""
import ctypes

from . import _buffers, _native
from ._native import lib


class Result:
    """Build one with Result.packed(...) or Result.split(...); backends, the reference and files
    hand them out. `backend` names what produced it, when known."""

    def __init__(self):
        raise TypeError("use Result.packed(...) or Result.split(...)")

    @classmethod
    def _new(cls, layout, rows, columns, arrays, ranks):
        result = cls.__new__(cls)
        result.layout, result.rows, result.columns = layout, rows, columns
        result._arrays, result._ranks = arrays, ranks
        result.backend, result.k, result.metadata = None, None, {}
        return result

    @classmethod
    def packed(cls, lp_logits, lp_tokens, lp_ranks=None, *, k=None):
        """lp_logits (float) and lp_tokens (integers) [N, W]; flat ones need k (W = K + 1)."""
        values = _buffers.f32(lp_logits, "lp_logits")
        tokens = _buffers.u32(lp_tokens, "lp_tokens")
        width = values.shape[1] if len(values.shape) == 2 else (None if k is None else k + 1)
        if width is None:
            raise ValueError("flat lp_logits need k= (each row holds K + 1 slots)")
        rows = values.shape[0] if len(values.shape) == 2 else (values.count // width if width else 0)
        for name, array in (("lp_logits", values), ("lp_tokens", tokens)):
            if array.count != rows * width:
                raise ValueError(f"{name} has {array.count} values, not {rows} rows of {width} slots")
        ranks = _ranks(lp_ranks, rows)
        return cls._new("packed", rows, width, {"lp_logits": values, "lp_tokens": tokens}, ranks)

    @classmethod
    def split(cls, top_tokens, top_logprobs, sampled_logprobs, ranks=None, *, k=None):
        """top_tokens (integers) and top_logprobs (float) [N, K], sampled_logprobs [N]; flat top
        arrays with N = 0 need k."""
        tokens = _buffers.u32(top_tokens, "top_tokens")
        values = _buffers.f32(top_logprobs, "top_logprobs")
        sampled = _buffers.f32(sampled_logprobs, "sampled_logprobs")
        rows = sampled.count
        if len(tokens.shape) == 2:
            columns = tokens.shape[1]
        elif rows:
            columns = tokens.count // rows
        elif k is not None:
            columns = k
        else:
            columns = 0
        for name, array in (("top_tokens", tokens), ("top_logprobs", values)):
            if array.count != rows * columns:
                raise ValueError(f"{name} has {array.count} values, not {rows} rows of {columns} (sampled_logprobs "
                                 f"has {rows} entries)")
        return cls._new("split", rows, columns, {"top_tokens": tokens, "top_logprobs": values,
                                                 "sampled_logprobs": sampled}, _ranks(ranks, rows))

    @classmethod
    def _from_handle(cls, handle):
        """A copy of a result the C API owns; the handle is freed."""
        try:
            view = _native.ResultView()
            lib.logprobs_result_get_view(handle, ctypes.byref(view))
            n, c = view.rows, view.columns

            def copy(pointer, count, fmt, shape):
                return _buffers.Array(_native.copy_out(pointer, 4 * count), fmt, count, shape)

            if view.layout == 0:
                arrays = {"lp_logits": copy(view.lp_logits, n * c, "f", (n, c)),
                          "lp_tokens": copy(view.lp_tokens, n * c, "I", (n, c))}
            else:
                arrays = {"top_tokens": copy(view.top_tokens, n * c, "I", (n, c)),
                          "top_logprobs": copy(view.top_logprobs, n * c, "f", (n, c)),
                          "sampled_logprobs": copy(view.sampled_logprobs, n, "f", (n,))}
            ranks = copy(view.ranks, n, "I", (n,)) if view.has_ranks else None
            result = cls._new("packed" if view.layout == 0 else "split", n, c, arrays, ranks)
            k = lib.logprobs_result_k(handle)
            result.k = None if k < 0 else k
            key, value = ctypes.c_char_p(), ctypes.c_char_p()
            for i in range(lib.logprobs_result_metadata_count(handle)):
                lib.logprobs_result_metadata(handle, i, ctypes.byref(key), ctypes.byref(value))
                result.metadata[_native.text(key.value)] = _native.text(value.value)
            result.backend = result.metadata.get("backend")
            return result
        finally:
            lib.logprobs_result_free(handle)

    def view(self):
        """The C view (logprobs_result_view) over this result's arrays; valid while it lives."""
        v = _native.ResultView()
        v.layout = 0 if self.layout == "packed" else 1
        v.rows, v.columns = self.rows, self.columns
        for name, array in self._arrays.items():
            setattr(v, name, _native.address(array.data))
        if self._ranks is not None:
            v.has_ranks, v.ranks = 1, _native.address(self._ranks.data)
        return v

    def _get(self, name):
        if name not in self._arrays:
            raise AttributeError(f"a {self.layout} result has no {name}")
        return self._arrays[name].view()

    lp_logits = property(lambda self: self._get("lp_logits"), doc="packed: [N, K + 1] values")
    lp_tokens = property(lambda self: self._get("lp_tokens"), doc="packed: [N, K + 1] tokens")
    top_tokens = property(lambda self: self._get("top_tokens"), doc="split: [N, K]")
    top_logprobs = property(lambda self: self._get("top_logprobs"), doc="split: [N, K]")
    sampled_logprobs = property(lambda self: self._get("sampled_logprobs"), doc="split: [N]")
    ranks = property(lambda self: None if self._ranks is None else self._ranks.view(), doc="[N] or None")

    @property
    def top_k(self):
        """K: the top slots of a row."""
        return self.columns - 1 if self.layout == "packed" else self.columns

    def __repr__(self):
        by = f" from {self.backend}" if self.backend else ""
        return (f"<logprobs_harness.Result {self.layout}, {self.rows} rows, K = {self.top_k}"
                f"{', ranks' if self._ranks is not None else ''}{by}>")


def _ranks(ranks, rows):
    if ranks is None:
        return None
    array = _buffers.u32(ranks, "ranks")
    if array.count != rows:
        raise ValueError(f"ranks has {array.count} entries, not one per row ({rows})")
    return array
