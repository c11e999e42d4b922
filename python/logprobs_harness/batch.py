"""A ragged batch (SPEC §1) that owns copies of its arrays, built from any buffers or tensors,
from the generators or from a file; and its row plan (SPEC §2 steps 1-4)."""
import ctypes

from . import _buffers, _native
from ._native import call, lib


class Plan:
    """For each output row: the logit row it reads, its evaluated token and its batch item."""

    __slots__ = ("logit_rows", "tokens", "batch_items")

    def __init__(self, logit_rows, tokens, batch_items):
        self.logit_rows, self.tokens, self.batch_items = logit_rows, tokens, batch_items

    def __len__(self):
        return len(self.logit_rows)


class Batch:
    """A ragged batch of logits, as SPEC §1 lays it out.

    logits: [rows, V] (or more leading dimensions, flattened into rows), or flat with `vocab`
        (and `row_stride`) given: float32, float16, a torch bfloat16 tensor, or 16-bit integers
        holding bf16/f16 bit patterns with `dtype`. Kept in their dtype, never rounded.
    sampled_tokens: [B], the token just sampled for each batch item.
    tokens, logit_row_offsets, token_row_offsets, lp_output_offsets: the ragged layout; give all
        three offset arrays or none (none: one logit row and one output row per batch item).
    temperatures: [B] or None (SPEC §2.5).
    """

    def __init__(self, logits, sampled_tokens, *, tokens=None, logit_row_offsets=None, token_row_offsets=None,
                 lp_output_offsets=None, temperatures=None, dtype=None, vocab=None, row_stride=None):
        array, self.dtype, shape = _buffers.logits(logits, dtype)
        if len(shape) >= 2:
            if vocab is not None and vocab != shape[-1]:
                raise ValueError(f"vocab={vocab} but the logits have shape {list(shape)}")
            self.vocab = shape[-1]
            self.row_stride = self.vocab if row_stride is None else row_stride
        else:
            if vocab is None:
                raise ValueError("flat logits need vocab= (and row_stride= when rows are wider than V)")
            self.vocab = vocab
            self.row_stride = vocab if row_stride is None else row_stride
        if self.row_stride <= 0 or array.count % self.row_stride:
            raise ValueError(f"{array.count} logits do not make whole rows of stride {self.row_stride}")
        self.rows = array.count // self.row_stride
        array.shape = (self.rows, self.row_stride)
        self._logits = array
        self._sampled = _buffers.u32(sampled_tokens, "sampled_tokens")
        offsets = (logit_row_offsets, token_row_offsets, lp_output_offsets)
        if all(o is None for o in offsets):
            b = self._sampled.count
            logit_row_offsets = lp_output_offsets = range(b + 1)
            token_row_offsets = [0] * (b + 1)
        elif any(o is None for o in offsets):
            raise TypeError("give logit_row_offsets, token_row_offsets and lp_output_offsets together, or none")
        self._tokens = _buffers.u32(tokens, "tokens")
        self._lro = _buffers.u32(logit_row_offsets, "logit_row_offsets")
        self._tro = _buffers.u32(token_row_offsets, "token_row_offsets")
        self._loo = _buffers.u32(lp_output_offsets, "lp_output_offsets")
        self._temperatures = None if temperatures is None else _buffers.f32(temperatures, "temperatures")
        self.k = None  # K from a file's metadata
        self.metadata = {}
        self._view = self._make_view()

    # -- from the C API -------------------------------------------------------------------------

    @classmethod
    def _from_view(cls, view):
        """A copy of a C batch view's arrays (valid only during the call that handed it out)."""
        batch = cls.__new__(cls)
        batch.dtype = _native.DTYPES.get(view.dtype, "f32")
        batch.rows, batch.vocab, batch.row_stride = view.rows, view.vocab, view.row_stride
        width = 4 if batch.dtype == "f32" else 2
        count = view.rows * view.row_stride
        batch._logits = _buffers.Array(_native.copy_out(view.logits, count * width), "f" if width == 4 else "H",
                                       count, (view.rows, view.row_stride))

        def u32(pointer, n):
            return _buffers.Array(_native.copy_out(pointer, 4 * n), "I", n)

        batch._tokens = u32(view.tokens, view.tokens_count)
        batch._sampled = u32(view.sampled_tokens, view.batch_size)
        batch._lro = u32(view.logit_row_offsets, view.logit_row_offsets_count)
        batch._tro = u32(view.token_row_offsets, view.token_row_offsets_count)
        batch._loo = u32(view.lp_output_offsets, view.lp_output_offsets_count)
        batch._temperatures = None
        if view.has_temperatures:
            n = view.temperatures_count
            batch._temperatures = _buffers.Array(_native.copy_out(view.temperatures, 4 * n), "f", n)
        batch.k, batch.metadata = None, {}
        batch._view = batch._make_view()
        return batch

    @classmethod
    def _from_handle(cls, handle):
        """A copy of a batch the C API owns; the handle is freed."""
        try:
            view = _native.BatchView()
            lib.logprobs_batch_get_view(handle, ctypes.byref(view))
            batch = cls._from_view(view)
            k = lib.logprobs_batch_k(handle)
            batch.k = None if k < 0 else k
            key, value = ctypes.c_char_p(), ctypes.c_char_p()
            for i in range(lib.logprobs_batch_metadata_count(handle)):
                lib.logprobs_batch_metadata(handle, i, ctypes.byref(key), ctypes.byref(value))
                batch.metadata[_native.text(key.value)] = _native.text(value.value)
            return batch
        finally:
            lib.logprobs_batch_free(handle)

    def _make_view(self):
        v = _native.BatchView()
        v.logits = _native.address(self._logits.data)
        v.dtype = _native.DTYPE_CODES[self.dtype]
        v.rows, v.vocab, v.row_stride = self.rows, self.vocab, self.row_stride
        for field, array in (("tokens", self._tokens), ("sampled_tokens", self._sampled),
                             ("logit_row_offsets", self._lro), ("token_row_offsets", self._tro),
                             ("lp_output_offsets", self._loo)):
            setattr(v, field, _native.address(array.data))
            setattr(v, "batch_size" if field == "sampled_tokens" else field + "_count", array.count)
        if self._temperatures is not None:
            v.has_temperatures = 1
            v.temperatures = _native.address(self._temperatures.data)
            v.temperatures_count = self._temperatures.count
        return v

    @property
    def view(self):
        """The C view (logprobs_batch_view) over this batch's arrays."""
        return self._view

    # -- what it holds ----------------------------------------------------------------------------

    logits = property(lambda self: self._logits.view(),
                      doc="[rows, row_stride]: 'f' elements for f32, 'H' bit patterns for bf16 and f16")
    tokens = property(lambda self: self._tokens.view())
    sampled_tokens = property(lambda self: self._sampled.view())
    logit_row_offsets = property(lambda self: self._lro.view())
    token_row_offsets = property(lambda self: self._tro.view())
    lp_output_offsets = property(lambda self: self._loo.view())
    temperatures = property(lambda self: None if self._temperatures is None else self._temperatures.view())
    batch_size = property(lambda self: self._sampled.count)

    @property
    def output_rows(self):
        """N = lp_output_offsets[B] (0 without offsets)."""
        return self._loo.view()[-1] if self._loo.count else 0

    def output_shape(self, k):
        """(N, W = K + 1), after checking SPEC §4 (InvalidBatch names the first broken rule)."""
        rows, width = _native.c_u64(), _native.c_u64()
        call(lib.logprobs_output_shape, ctypes.byref(self._view), _native.checked_k(k), ctypes.byref(rows),
             ctypes.byref(width))
        return rows.value, width.value

    def validate(self, k=0):
        """Raises InvalidBatch when the batch (or K) breaks SPEC §4."""
        self.output_shape(k)

    def plan(self):
        """SPEC §2 steps 1-4: each output row's logit row, evaluated token and batch item."""
        n, _ = self.output_shape(0)
        logit_rows, tokens, items = (ctypes.c_uint64 * n)(), (ctypes.c_uint32 * n)(), (ctypes.c_uint32 * n)()
        count = _native.c_u64()
        call(lib.logprobs_plan_rows, ctypes.byref(self._view), n, logit_rows, tokens, items, ctypes.byref(count))
        return Plan(list(logit_rows), list(tokens), list(items))

    def describe(self):
        """'B = 2, V = 5, 2 logit rows, 2 output rows, f32' and what else is special."""
        def rows(n, what):
            return f"{n} {what} row{'' if n == 1 else 's'}"

        text = f"B = {self.batch_size}, V = {self.vocab}, {rows(self.rows, 'logit')}, "
        text += f"{rows(self.output_rows, 'output')}, {self.dtype}"
        if self.row_stride != self.vocab:
            text += f", row stride {self.row_stride}"
        return text + (", temperatures" if self._temperatures is not None else "")

    def __repr__(self):
        return f"<logprobs_harness.Batch {self.describe()}>"

    def torch_logits(self):
        """The logits as a torch tensor [rows, V] of the batch's dtype (a copy)."""
        import torch

        dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[self.dtype]
        if not self._logits.count:
            return torch.empty((self.rows, self.vocab), dtype=dtype)
        flat = torch.frombuffer(bytearray(self._logits.data), dtype=dtype)
        return flat.view(self.rows, self.row_stride)[:, : self.vocab]

    def numpy_logits(self):
        """The logits as a numpy array [rows, V]: float32, float16, or uint16 bf16 bit patterns (a copy)."""
        import numpy

        dtype = {"f32": numpy.float32, "bf16": numpy.uint16, "f16": numpy.float16}[self.dtype]
        flat = numpy.frombuffer(bytes(self._logits.data), dtype=dtype)
        return flat.reshape(self.rows, self.row_stride)[:, : self.vocab].copy()

    def numpy_x(self):
        """Each output row's x as a numpy float32 array [N, V] (SPEC §2 steps 1-5: its logit row
        widened exactly to f32, divided by its batch item's temperature): what a kernel computes on."""
        import numpy

        logits = self.numpy_logits()
        if self.dtype == "bf16":
            logits = (logits.astype(numpy.uint32) << 16).view(numpy.float32)
        plan = self.plan()
        x = logits[numpy.asarray(plan.logit_rows, dtype=numpy.int64)].astype(numpy.float32)
        if self._temperatures is not None and len(plan):
            with numpy.errstate(over="ignore", invalid="ignore"):  # x / T overflows to inf, NaN / T is NaN
                x /= numpy.asarray(self.temperatures, dtype=numpy.float32)[numpy.asarray(plan.batch_items)][:, None]
        return x.reshape(len(plan), self.vocab)
