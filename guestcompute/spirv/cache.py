"""GLSL → SPIR-V: baked (shipped in the package, spirv/baked_files.py) → disk cache → glslc.

Everything is content-addressed by the SHA-256 of the GLSL text plus the
target environment, so a changed kernel source can never pick up stale
SPIR-V: it simply misses. A glslc subprocess costs ~100 ms, hence the disk
cache; built-in kernels never need glslc because their SPIR-V is baked.

A disk-cache file is named by the hash of its *source*, so its name says
nothing about whether its bytes are intact: each file starts with a small
header holding the SHA-256 of the file's key and the SPIR-V that follows. A
truncated, bit-flipped or foreign file (another kernel's, renamed) fails that
check, is reported with a warning and compiled again (a flipped bit that kept
the SPIR-V magic would otherwise reach the driver). So is anything at a cache
path that is not a regular file of at most :data:`MAX_FILE_BYTES` (a named
pipe, a device, a huge file): it is never opened blocking or read whole.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from ..log import log
from ..paths import CacheFileRefused, atomic_write, cache_root, read_cache_file
from . import baked_files
from .compiler import TARGET_ENV, compile_source, is_spirv, source_key

DISK_MAGIC = b"GCSPV1\n\0"   # disk-cache header: this magic, then sha256(key + spirv)
# The largest SPIR-V file read back (the biggest built-in kernel is a few
# dozen KiB); anything larger at a cache path is ignored with a warning.
MAX_FILE_BYTES = 16 << 20


class SpirvCache:
    """Thread-safety: safe from any thread (one compile per key at a time)."""

    def __init__(self, cache_dir=None):
        self.dir = cache_root(cache_dir) / "spirv"
        self._lock = threading.Lock()
        self._memory: dict = {}
        self.stats = {"spirv_baked_hits": 0, "spirv_disk_hits": 0, "spirv_compiles": 0,
                      "spirv_bad_files": 0}

    def get(self, glsl: str, target_env: str = TARGET_ENV) -> bytes:
        key = source_key(glsl, target_env)
        hit = self._memory.get(key)
        if hit is not None:
            return hit
        with self._lock:
            data = self._load(baked_files.path(key), "spirv_baked_hits", baked_files.decode)
            if data is None:
                data = self._load_disk(key)
            if data is None:
                data = compile_source(glsl, target_env)
                self.store(key, data)
            self._memory[key] = data
            return data

    # -- SPIR-V made elsewhere (Slang), under a key its compiler chose ----------------
    def lookup(self, key: str):
        """The SPIR-V stored under ``key`` (memory, then disk), or None."""
        hit = self._memory.get(key)
        if hit is None:
            hit = self._load_disk(key)
            if hit is not None:
                self._memory[key] = hit
        return hit

    def store(self, key: str, spirv: bytes) -> None:
        """Keep freshly compiled ``spirv`` under ``key``: in memory and on disk."""
        self._memory[key] = spirv
        self.stats["spirv_compiles"] += 1
        try:
            atomic_write(self.dir / f"{key}.spv", seal(spirv, key))
        except OSError as e:
            log.warning("guestcompute: cannot write SPIR-V cache %s (%s); continuing without disk caching",
                        self.dir, e)

    def manifest(self, base: str):
        """The files a kernel with key ``base`` read when it last compiled, or None."""
        try:
            data = read_cache_file(self.dir / f"{base}.deps", MAX_FILE_BYTES)
            files = json.loads(data.decode("utf-8"))
        except (OSError, CacheFileRefused, ValueError):
            return None
        return files if isinstance(files, list) and all(isinstance(f, str) for f in files) else None

    def remember_manifest(self, base: str, files: list) -> None:
        try:
            atomic_write(self.dir / f"{base}.deps", json.dumps(files).encode("utf-8"))
        except OSError:
            pass        # only costs a compile next time

    def _load_disk(self, key: str):
        return self._load(self.dir / f"{key}.spv", "spirv_disk_hits", lambda data: unseal(data, key))

    def _load(self, path: Path, counter: str, decode):
        """The SPIR-V ``decode`` finds in the file at ``path``, or None
        (missing, refused or damaged: the last two with a warning)."""
        try:
            data = read_cache_file(path, MAX_FILE_BYTES)
        except CacheFileRefused as e:
            log.warning("guestcompute: ignoring SPIR-V cache file %s: %s; compiling the kernel "
                        "again", path, e)
            self.stats["spirv_bad_files"] += 1
            return None
        except OSError:
            return None
        data = decode(data)
        if data is None or not is_spirv(data):
            log.warning("guestcompute: ignoring corrupt SPIR-V cache file %s (truncated, damaged or "
                        "another kernel's); compiling the kernel again", path)
            self.stats["spirv_bad_files"] += 1
            return None
        self.stats[counter] += 1
        return data


def _digest(key: str, spirv: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\n" + spirv).digest()


def seal(spirv: bytes, key: str) -> bytes:
    """Disk-cache file contents for source ``key``: the header, then the SPIR-V."""
    return DISK_MAGIC + _digest(key, spirv) + spirv


def unseal(data: bytes, key: str):
    """The SPIR-V inside the disk-cache file of ``key``, or None unless the
    file is intact and really belongs to ``key``."""
    head = len(DISK_MAGIC) + 32
    if len(data) <= head or not data.startswith(DISK_MAGIC):
        return None
    spirv = data[head:]
    if _digest(key, spirv) != data[len(DISK_MAGIC):head]:
        return None
    return spirv


