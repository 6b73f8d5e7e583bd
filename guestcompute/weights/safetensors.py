"""``load_safetensors(src)``: the tensors of a safetensors file as numpy
arrays, with numpy alone (no ``safetensors`` package).

The format: 8 bytes, the header's length N as a little-endian uint64; N
bytes of UTF-8 JSON mapping each tensor's name to ``{"dtype", "shape",
"data_offsets": [begin, end]}`` (offsets into the data, which follows the
header), and an optional ``"__metadata__"`` of strings; then the data,
little-endian, C order. The header is checked before any tensor is made:
every offset in range, every tensor's bytes its shape times its item size,
the tensors tiling the data exactly (no gap, no overlap, nothing after
them). A file that breaks a rule is an ``InvalidArgumentError`` saying
which rule and which tensor.

Dtypes: the numpy ones keep their type (F64 stays float64 too: a reader
loses nothing, and whatever takes the array rounds it as it always does —
``gc.Dense`` to the network's dtype, ``ctx.tensor`` to float32); BF16,
which numpy lacks, widens to float32 exactly (its bits are float32's top
half). Any other dtype (the F8 and smaller floats, complex) is a
``DTypeError`` naming the tensor.

A path is memory-mapped: the arrays are read-only views of the mapping,
read from disk when used (BF16 and BOOL are converted, so read at once).
Bytes are viewed without a copy (read-only for ``bytes``).
"""
from __future__ import annotations

import json
import math
import mmap
import os

import numpy as np

from ..errors import DTypeError, InvalidArgumentError

# The same bound the reference implementation puts on a header: a longer
# one is a corrupt length, not a real file.
MAX_HEADER = 100 * 1024 * 1024

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
          "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
          "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "u1"}
ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


def load_safetensors(src) -> dict:
    """``{name: numpy array}`` of safetensors file ``src`` (a path, or the
    file's bytes), in the header's order."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        buf = memoryview(src).cast("B")
    elif isinstance(src, (str, os.PathLike)):
        buf = _mapped(src)
    else:
        raise InvalidArgumentError(f"load_safetensors: expected a path or the file's bytes, got "
                                   f"{type(src).__name__}")
    header, data = _split(buf)
    entries = _entries(header, len(data))
    return {name: _array(name, dtype, shape, data[begin:end]) for name, dtype, shape, (begin, end) in entries}


def _mapped(path) -> memoryview:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise InvalidArgumentError(f"safetensors: {os.fspath(path)!r} is empty")
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _corrupt(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"safetensors: corrupt file: {message}")


def _split(buf: memoryview) -> tuple:
    """The parsed JSON header and the data after it."""
    if len(buf) < 8:
        raise _corrupt(f"{len(buf)} bytes, shorter than the 8-byte header length")
    n = int.from_bytes(buf[:8], "little")
    if n < 2 or n > MAX_HEADER:
        raise _corrupt(f"header length {n} (at most {MAX_HEADER} bytes, and at least a JSON object)")
    if 8 + n > len(buf):
        raise _corrupt(f"header length {n} runs past the end of the {len(buf)}-byte file")
    try:
        text = bytes(buf[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise _corrupt(f"the header is not UTF-8 ({e})") from None
    if not text.startswith("{"):
        raise _corrupt("the header is not a JSON object")
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as e:      # JSONDecodeError, or a name given twice
        raise _corrupt(f"the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise _corrupt("the header is not a JSON object")
    return header, buf[8 + n:]


def _no_duplicates(pairs) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"{key!r} appears twice")
        out[key] = value
    return out


def _entries(header: dict, data_size: int) -> list:
    """(name, dtype, shape, (begin, end)) per tensor, once every rule holds."""
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise _corrupt("__metadata__ must map names to strings")
    entries = [_entry(name, info, data_size) for name, info in header.items()]
    end = 0
    for name, _, _, (begin, stop) in sorted(entries, key=lambda e: e[3]):
        if begin != end:
            what = "overlaps the tensor before it" if begin < end else f"leaves a gap of {begin - end} bytes"
            raise _corrupt(f"tensor {name!r} at bytes [{begin}, {stop}) of the data {what}")
        end = stop
    if end != data_size:
        raise _corrupt(f"the tensors cover {end} bytes of the data but the file holds {data_size}")
    return entries


def _entry(name: str, info, data_size: int) -> tuple:
    if not name:
        raise _corrupt("a tensor has an empty name")
    if not isinstance(info, dict) or set(info) != ENTRY_KEYS:
        keys = sorted(info) if isinstance(info, dict) else type(info).__name__
        raise _corrupt(f"tensor {name!r}: expected the keys {sorted(ENTRY_KEYS)}, got {keys}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise _corrupt(f"tensor {name!r}: dtype {dtype!r} is not a string")
    if dtype not in DTYPES:
        raise DTypeError(f"safetensors: tensor {name!r} has dtype {dtype!r}; numpy arrays are read of "
                         f"{', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise _corrupt(f"tensor {name!r}: shape {shape!r} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise _corrupt(f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end] with 0 <= begin <= end")
    if offsets[1] > data_size:
        raise _corrupt(f"tensor {name!r}: data_offsets {offsets} run past the {data_size} bytes of data")
    size = math.prod(shape) * np.dtype(DTYPES[dtype]).itemsize
    if offsets[1] - offsets[0] != size:
        raise _corrupt(f"tensor {name!r}: shape {shape} of {dtype} is {size} bytes, its data_offsets "
                       f"{offsets} hold {offsets[1] - offsets[0]}")
    return name, dtype, tuple(shape), tuple(offsets)


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _array(name: str, dtype: str, shape: tuple, raw: memoryview) -> np.ndarray:
    a = np.frombuffer(raw, DTYPES[dtype]) if len(raw) else np.empty(0, DTYPES[dtype])
    if dtype == "BF16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    elif dtype == "BOOL":
        if a.size and a.max() > 1:
            raise _corrupt(f"tensor {name!r}: a BOOL byte is {int(a.max())}, not 0 or 1")
        a = a.view(np.bool_)
    return a.reshape(shape)
