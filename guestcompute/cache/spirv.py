"""GLSL → SPIR-V: baked (shipped in the package) → disk cache → glslc.

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

GLSL sources are text that must encode as UTF-8 (a str holding a lone
surrogate, e.g. from ``errors="surrogateescape"`` decoding, is refused with
an InvalidArgumentError); compiler and validator output is decoded with
replacement characters, so a message echoing raw bytes still reads.
"""
from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path

from ..errors import CompilerNotFoundError, InvalidArgumentError, KernelError
from ..log import log
from .paths import CacheFileRefused, atomic_write, cache_root, read_cache_file

BAKED_DIR = Path(__file__).resolve().parent.parent / "kernels" / "baked"
TARGET_ENV = "vulkan1.0"  # SPIR-V 1.0 runs on every Vulkan 1.0 device
SPIRV_MAGIC = b"\x03\x02\x23\x07"
DISK_MAGIC = b"GCSPV1\n\0"   # disk-cache header: this magic, then sha256(key + spirv)
# The largest SPIR-V file read back (the biggest built-in kernel is a few
# dozen KiB); anything larger at a cache path is ignored with a warning.
MAX_FILE_BYTES = 16 << 20


def glsl_bytes(glsl: str) -> bytes:
    """The UTF-8 bytes of a GLSL source; InvalidArgumentError (saying where)
    for text that has no UTF-8 form, such as a lone surrogate."""
    try:
        return glsl.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(
            f"the GLSL source is not valid text: {e.object[e.start:e.end]!r} at index {e.start} "
            f"({e.reason}) has no UTF-8 form; remove it or decode the source file strictly "
            "(e.g. open(path, encoding='utf-8'))") from None


def source_key(glsl: str, target_env: str = TARGET_ENV) -> str:
    return hashlib.sha256(target_env.encode() + b"\n" + glsl_bytes(glsl)).hexdigest()


def is_spirv(data: bytes) -> bool:
    return len(data) >= 20 and len(data) % 4 == 0 and data[:4] in (SPIRV_MAGIC, SPIRV_MAGIC[::-1])


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
            data = self._load(BAKED_DIR / f"{key}.spv", "spirv_baked_hits")
            if data is None:
                data = self._load(self.dir / f"{key}.spv", "spirv_disk_hits", key=key)
            if data is None:
                data = compile_glsl(glsl, target_env)
                self.stats["spirv_compiles"] += 1
                try:
                    atomic_write(self.dir / f"{key}.spv", seal(data, key))
                except OSError as e:
                    log.warning("guestcompute: cannot write SPIR-V cache %s (%s); continuing "
                                "without disk caching", self.dir, e)
            self._memory[key] = data
            return data

    def _load(self, path: Path, counter: str, key: str = None):
        try:
            data = read_cache_file(path, MAX_FILE_BYTES)
        except CacheFileRefused as e:
            log.warning("guestcompute: ignoring SPIR-V cache file %s: %s; compiling the kernel "
                        "again", path, e)
            self.stats["spirv_bad_files"] += 1
            return None
        except OSError:
            return None
        if key is not None:
            data = unseal(data, key)
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


_validated: set = set()          # (sha256, target env) of SPIR-V that passed spirv-val
_warned_no_validator = []


def validate(spirv: bytes, target_env: str) -> None:
    """Check SPIR-V that did not come from our own compiler with spirv-val
    before any driver sees it: drivers may crash on invalid code (lavapipe
    does, even under the validation layer, which reports it but passes it
    on). Without spirv-val only reflection's structural checks stand guard
    (a warning, once). Raises KernelError."""
    key = (hashlib.sha256(spirv).digest(), target_env)
    if key in _validated:
        return
    exe = shutil.which("spirv-val")
    if exe is None:
        if not _warned_no_validator:
            _warned_no_validator.append(True)
            log.warning("guestcompute: spirv-val not found, so SPIR-V passed in is not validated "
                        "before it reaches the driver (Debian/Ubuntu: apt-get install spirv-tools)")
        return
    import subprocess, tempfile     # only now: see compile_glsl
    with tempfile.TemporaryDirectory(prefix="guestcompute-") as tmp:
        path = Path(tmp) / "kernel.spv"
        path.write_bytes(spirv)
        # errors="replace": spirv-val echoes strings of a corrupt module byte for byte.
        proc = subprocess.run([exe, "--target-env", target_env, str(path)], capture_output=True,
                              encoding="utf-8", errors="replace")
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise KernelError(f"the kernel's SPIR-V is invalid for {target_env} (spirv-val: "
                          f"{detail[0] if detail else 'failed'}); recompile it from its source")
    _validated.add(key)


def glslc_path() -> str:
    path = shutil.which("glslc")
    if path is None:
        raise CompilerNotFoundError(
            "glslc is needed to compile user GLSL (built-in kernels ship precompiled); "
            "install it (Debian/Ubuntu: apt-get install glslc) or pass SPIR-V bytes instead")
    return path


def compile_glsl(glsl: str, target_env: str = TARGET_ENV) -> bytes:
    # subprocess and tempfile are imported here, not with the package: they
    # import more of the stdlib (random, selectors...), and an application's
    # own random.py beside its script must not break guestcompute's import.
    import subprocess, tempfile
    with tempfile.TemporaryDirectory(prefix="guestcompute-") as tmp:
        src = Path(tmp) / "kernel.comp"
        dst = Path(tmp) / "kernel.spv"
        src.write_bytes(glsl_bytes(glsl))
        proc = subprocess.run([glslc_path(), f"--target-env={target_env}", "-O", str(src),
                               "-o", str(dst)], capture_output=True, encoding="utf-8",
                              errors="replace")
        if proc.returncode != 0:
            raise KernelError(f"GLSL failed to compile; fix the source (glslc says):\n{proc.stderr.strip()}")
        return dst.read_bytes()
