"""SPEC §7 batch and result files (safetensors), read and written by the harness's own code;
writes are atomic (a temporary file in the same folder, then a rename)."""
import ctypes
import os

from . import _native
from ._native import call, lib


def load_batch(path):
    """The batch in a batch file (logits in the file's dtype); its `k` and `metadata` from the file."""
    from .batch import Batch

    handle = _native.c_ptr()
    call(lib.logprobs_load_batch, os.fsencode(path), ctypes.byref(handle))
    return Batch._from_handle(handle)


def load_result(path):
    """The result in a result file, in its layout (packed or split); `k`, `metadata` and
    `backend` from the file."""
    from .result import Result

    handle = _native.c_ptr()
    call(lib.logprobs_load_result, os.fsencode(path), ctypes.byref(handle))
    return Result._from_handle(handle)


def _metadata(metadata):
    items = [(str(key).encode(), str(value).encode()) for key, value in (metadata or {}).items()]
    keys = (ctypes.c_char_p * len(items))(*(key for key, _ in items))
    values = (ctypes.c_char_p * len(items))(*(value for _, value in items))
    return keys, values, len(items)


def save_batch(path, batch, k=None, metadata=None):
    """Writes a batch file: rows of V logits in the batch's dtype, K as metadata "k" when given."""
    keys, values, count = _metadata(metadata)
    call(lib.logprobs_save_batch, os.fsencode(path), ctypes.byref(batch.view),
         -1 if k is None else _native.checked_k(k), keys, values, count)


def save_result(path, result, metadata=None):
    """Writes a result file in the result's layout."""
    keys, values, count = _metadata(metadata)
    view = result.view()
    call(lib.logprobs_save_result, os.fsencode(path), ctypes.byref(view), keys, values, count)


def save(path, obj, **options):
    """save_batch or save_result, by what `obj` is."""
    from .batch import Batch

    return (save_batch if isinstance(obj, Batch) else save_result)(path, obj, **options)
