"""The built-in kernels' SPIR-V as shipped: one file per rendered source in
kernels/baked, named by its source key (spirv/compiler.source_key) with the
suffix :data:`SUFFIX`, holding the module compressed with zlib.

Compressed because they are many and repetitive: about 4,700 modules of 47
MB raw take 15 MB so, in the package and in a checkout. The bytes a driver
gets are the compiler's own, decompressed when a kernel is first asked for.
"""
from __future__ import annotations

import zlib
from pathlib import Path

from .compiler import is_spirv

BAKED_DIR = Path(__file__).resolve().parent.parent / "kernels" / "baked"
SUFFIX = ".spvz"
# The largest module decompressed (the biggest built-in kernel is under 100
# KiB): a damaged file cannot make a huge allocation.
MAX_SPIRV_BYTES = 16 << 20


def path(key: str, folder=None) -> Path:
    return Path(folder or BAKED_DIR) / f"{key}{SUFFIX}"


def encode(spirv: bytes) -> bytes:
    return zlib.compress(spirv, 9)


def decode(data: bytes):
    """The SPIR-V a baked file holds, or None when it holds none (damaged,
    not zlib, not SPIR-V, or larger than :data:`MAX_SPIRV_BYTES`)."""
    try:
        unpacker = zlib.decompressobj()
        spirv = unpacker.decompress(data, MAX_SPIRV_BYTES)
    except zlib.error:
        return None
    if unpacker.unconsumed_tail or unpacker.unused_data or not unpacker.eof or not is_spirv(spirv):
        return None
    return spirv


def keys(folder=None) -> set:
    """The source keys that have a file in ``folder`` (default kernels/baked)."""
    folder = Path(folder or BAKED_DIR)
    return {p.name[:-len(SUFFIX)] for p in folder.glob(f"*{SUFFIX}")} if folder.is_dir() else set()
