"""safetensors files written by hand with numpy (the public format: an
8-byte little-endian header length, a JSON header padded with spaces, the
data), for tests that read them."""
import json
import struct

import numpy as np

CODES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
         "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
         "U8": np.uint8, "BOOL": np.bool_}


def pack(entries, metadata=None, align=8) -> bytes:
    """A safetensors file of ``entries`` [(name, dtype code, shape, raw
    bytes)], their data one after another in that order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, code, shape, raw in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return with_header(json.dumps(header).encode(), data, align)


def with_header(text: bytes, data: bytes = b"", align: int = 8) -> bytes:
    text += b" " * (-(8 + len(text)) % align)        # the format pads the header with spaces
    return struct.pack("<Q", len(text)) + text + data


def pack_arrays(arrays: dict, metadata=None) -> bytes:
    """A safetensors file of numpy ``arrays`` (dtypes of CODES)."""
    code = {np.dtype(v): k for k, v in CODES.items()}
    return pack([(name, code[a.dtype], a.shape, np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())
                 for name, a in arrays.items()], metadata)
