"""A minimal PNG writer (8-bit RGB/RGBA, no interlacing) using zlib + struct."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPE = {3: 2, 4: 6}  # channels -> PNG colour type (2 = RGB, 6 = RGBA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(pixels: np.ndarray, compress_level: int = 6) -> bytes:
    """Encode an (H, W, 3|4) uint8 array as PNG bytes."""
    pixels = np.ascontiguousarray(pixels)
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] not in _COLOR_TYPE:
        raise ValueError(f"expected (H, W, 3|4) uint8 pixels, got {pixels.shape} {pixels.dtype}")
    height, width, channels = pixels.shape

    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPE[channels], 0, 0, 0)
    # Every scanline starts with its filter type; 0 = no filter.
    rows = np.zeros((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 1:] = pixels.reshape(height, width * channels)
    data = zlib.compress(rows.tobytes(), compress_level)

    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def write_png(path, pixels: np.ndarray) -> Path:
    """Write an (H, W, 3|4) uint8 array to ``path`` as PNG; returns the path."""
    path = Path(path)
    path.write_bytes(encode_png(pixels))
    return path
