"""Arrays from what callers hold: any buffer-protocol object (numpy arrays, array.array,
memoryview, bytes), torch tensors (CPU; CUDA ones are copied to the host) and lists, each copied
into a bytearray of the C API's element type (u32, f32, or the logits' dtype). numpy and torch
are never imported here: a tensor is recognised by its type's module."""
import array
import struct
import sys

_U32_MAX = 2**32 - 1


class Array:
    """A little-endian array the package owns: `data` (a bytearray), its element format ('I',
    'f', 'H' for 16-bit logit bit patterns), element count and shape."""

    __slots__ = ("data", "format", "count", "shape")

    def __init__(self, data, format, count, shape=None):
        self.data, self.format, self.count = data, format, count
        self.shape = tuple(shape) if shape is not None else (count,)

    def view(self):
        """A read-only memoryview of the elements, in `shape`."""
        flat = memoryview(self.data).toreadonly().cast("B").cast(self.format)
        return flat.cast("B").cast(self.format, self.shape) if len(self.shape) > 1 and self.count else flat

    def tolist(self):
        return memoryview(self.data).cast(self.format).tolist()


def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


def _is_numpy(obj):
    return type(obj).__module__.split(".")[0] == "numpy" and hasattr(obj, "dtype")


def _torch_bytes(tensor):
    """The bytes of a tensor, C order, on the host."""
    import ctypes

    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    nbytes = tensor.numel() * tensor.element_size()
    data = bytearray(nbytes)
    if nbytes:
        ctypes.memmove((ctypes.c_char * nbytes).from_buffer(data), tensor.data_ptr(), nbytes)
    return data


def _kind(view):
    """('int' | 'uint' | 'float' | 'bool', itemsize) of a memoryview's format; TypeError for others."""
    fmt = view.format
    if fmt[:1] in "<>!=@":
        if fmt[0] in ">!" and view.itemsize > 1 and sys.byteorder == "little":
            raise TypeError(f"big-endian data (format '{fmt}') is not supported; convert it to native order")
        fmt = fmt[1:]
    kinds = {"b": "int", "h": "int", "i": "int", "l": "int", "q": "int", "n": "int",
             "B": "uint", "H": "uint", "I": "uint", "L": "uint", "Q": "uint", "N": "uint",
             "e": "float", "f": "float", "d": "float", "?": "bool"}
    if fmt not in kinds:
        raise TypeError(f"unsupported element format '{view.format}'")
    return kinds[fmt], view.itemsize, fmt


class _Raw:
    """A buffer's elements as C-order bytes, with their kind ('int', 'uint', 'float', 'bool'),
    itemsize, struct format character, count and shape."""

    def __init__(self, obj, name):
        try:
            view = memoryview(obj)
        except TypeError:
            raise TypeError(f"{name}: expected a buffer (numpy array, array.array, memoryview), a torch tensor or "
                            f"a list, got {type(obj).__name__}") from None
        self.kind, self.itemsize, self.format = _kind(view)
        self.shape = tuple(view.shape)
        try:
            self.bytes = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
        except (TypeError, ValueError):  # a format memoryview cannot cast: its bytes, copied
            self.bytes = memoryview(view.tobytes())
        self.count = len(self.bytes) // self.itemsize if self.itemsize else 0

    def values(self):
        """The elements as Python numbers (struct: memoryview cannot cast to every format)."""
        return [v for (v,) in struct.iter_unpack("<" + self.format, self.bytes)]


def _shape(obj, name):
    if _is_torch(obj):
        return tuple(obj.shape)
    if isinstance(obj, (list, tuple, range)):
        return _nested(obj, name)[1]
    return _Raw(obj, name).shape


def _nested(obj, name):
    """A list (of lists, for [N, K]) as (flat list, shape); rows of unequal length are an error."""
    if obj and isinstance(obj[0], (list, tuple)):
        width = len(obj[0])
        if any(len(row) != width for row in obj):
            raise ValueError(f"{name}: rows of unequal length")
        return [v for row in obj for v in row], (len(obj), width)
    return list(obj), (len(obj),)


def u32(obj, name):
    """An array of u32 (tokens, offsets, ranks): integers of any width, each checked to fit."""
    if obj is None:
        return Array(bytearray(), "I", 0)
    shape = _shape(obj, name)
    if _is_torch(obj):
        if obj.is_floating_point() or obj.is_complex():
            raise TypeError(f"{name}: expected integers, got a {obj.dtype} tensor")
        if obj.numel() and (int(obj.min()) < 0 or int(obj.max()) > _U32_MAX):
            raise ValueError(f"{name}: values must lie in 0..2^32 - 1 (got {int(obj.min())}..{int(obj.max())})")
        import torch

        if obj.numel() and int(obj.max()) > 2**31 - 1:
            return Array(bytearray(array.array("I", obj.flatten().tolist())), "I", obj.numel(), shape)
        return Array(_torch_bytes(obj.to(torch.int32)), "I", obj.numel(), shape)
    if _is_numpy(obj) and obj.dtype.kind in "iub":
        if obj.size and (int(obj.min()) < 0 or int(obj.max()) > _U32_MAX):
            raise ValueError(f"{name}: values must lie in 0..2^32 - 1 (got {int(obj.min())}..{int(obj.max())})")
        obj = obj.astype("<u4")
    if isinstance(obj, (list, tuple, range)):
        obj = _checked_u32_array(_nested(obj, name)[0], name)
    raw = _Raw(obj, name)
    if raw.kind == "float":
        raise TypeError(f"{name}: expected integers, got floating-point data (format '{raw.format}')")
    if raw.kind == "uint" and raw.itemsize == 4:
        return Array(bytearray(raw.bytes), "I", raw.count, shape)
    return Array(bytearray(_checked_u32_array(raw.values(), name)), "I", raw.count, shape)


def _checked_u32_array(values, name):
    try:
        return array.array("I", values)
    except (OverflowError, TypeError) as e:
        raise ValueError(f"{name}: every value must be an integer in 0..2^32 - 1 ({e})") from None


def f32(obj, name):
    """An array of f32 (values, temperatures): floats of any width, rounded to f32."""
    shape = _shape(obj, name)
    if _is_torch(obj):
        import torch

        return Array(_torch_bytes(obj.to(torch.float32)), "f", obj.numel(), shape)
    if _is_numpy(obj):
        obj = obj.astype("<f4")
    if isinstance(obj, (list, tuple)):
        obj = array.array("f", _nested(obj, name)[0])
    raw = _Raw(obj, name)
    if raw.kind == "float" and raw.itemsize == 4:
        return Array(bytearray(raw.bytes), "f", raw.count, shape)
    if raw.kind == "bool":
        raise TypeError(f"{name}: expected numbers, got booleans")
    return Array(bytearray(array.array("f", raw.values())), "f", raw.count, shape)


_DTYPE_NAMES = {"f32": "f32", "float32": "f32", "float": "f32", "bf16": "bf16", "bfloat16": "bf16",
                "f16": "f16", "float16": "f16", "half": "f16"}


def dtype_name(dtype):
    """'f32', 'bf16' or 'f16' for a name ('bfloat16', 'F16', ...) or a torch dtype."""
    key = str(dtype).lower().replace("torch.", "")
    if key not in _DTYPE_NAMES:
        raise ValueError(f"unknown logits dtype {dtype!r} (f32, bf16 or f16)")
    return _DTYPE_NAMES[key]


def logits(obj, dtype=None):
    """Logits as stored: (Array of 'f' or 'H' elements, dtype name, shape). f32 data is f32,
    float16 data f16, a torch bfloat16 tensor bf16; raw 16-bit integers are bit patterns of the
    `dtype` given (bf16 or f16). Nothing is rounded: a batch's logits are what the caller holds."""
    wanted = dtype_name(dtype) if dtype is not None else None
    shape = _shape(obj, "logits")
    if _is_torch(obj):
        import torch

        found = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}.get(obj.dtype)
        if found is None and obj.dtype in (torch.int16,) and wanted in ("bf16", "f16"):
            found = wanted
        if found is None:
            raise TypeError(f"logits: a {obj.dtype} tensor; logits are float32, bfloat16 or float16")
        _check_dtype(found, wanted)
        return Array(_torch_bytes(obj), "f" if found == "f32" else "H", obj.numel(), shape), found, shape
    raw = _Raw(obj, "logits")
    kind, itemsize = raw.kind, raw.itemsize
    if kind == "float" and itemsize == 4:
        found = "f32"
    elif kind == "float" and itemsize == 2:
        found = "f16"
    elif kind in ("int", "uint") and itemsize == 2 and wanted in ("bf16", "f16"):
        found = wanted
    else:
        raise TypeError(f"logits: format '{raw.format}'; logits are float32, float16, or 16-bit integers holding "
                        f"bf16 or f16 bit patterns with dtype='bf16' or 'f16' (float64 data: convert it first)")
    _check_dtype(found, wanted)
    return Array(bytearray(raw.bytes), "f" if found == "f32" else "H", raw.count, shape), found, shape


def _check_dtype(found, wanted):
    if wanted is not None and wanted != found:
        raise TypeError(f"logits hold {found} values but dtype='{wanted}' was asked for; convert them first "
                        f"(torch: .to(torch.bfloat16)), nothing is rounded here")
