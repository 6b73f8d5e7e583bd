"""Building the compiled reference programs of the benchmark suite.

A program is built with ``nvcc`` (or a C++ compiler, with the same
``-o`` convention) into the cache folder
(``<guestcompute cache>/bench``) under a name that holds a hash of its
source, of what it is built against, of the compiler's version and of the
GPUs it runs on, so a machine builds each program once. What such a
program prints (one JSON object) is checked by :func:`checked_output`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from guestcompute.paths import cache_root

BUILD_TIMEOUT_S = 600


class BuildError(Exception):
    """The compiler failed; ``str(e)`` holds the end of what it printed."""


def cache_dir() -> Path:
    return cache_root() / "bench"


def gpu_models() -> str:
    """Name and compute capability of each GPU (``-arch=native`` builds for
    those), or "" where nvidia-smi cannot say."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        return subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def build(compiler: str, source: Path, flags: list, libraries: list = (), inputs: bytes = b"",
          folder: Path | None = None) -> Path:
    """The program ``compiler`` builds from ``source`` with ``flags``, linked with
    ``libraries``, compiled now unless an identical build is cached.
    ``inputs`` is whatever else the build reads (headers outside the CUDA
    toolkit), hashed into the name."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    recipe = "\0".join([*flags, *libraries]).encode()
    digest = hashlib.sha256(source.read_bytes() + recipe + inputs + version.encode() + gpu_models().encode())
    folder = folder or cache_dir()
    exe = folder / f"{source.stem}-{digest.hexdigest()[:16]}"
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{exe.name}.{os.getpid()}.tmp"
    proc = subprocess.run([compiler, *flags, "-o", str(partial), str(source), *libraries],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildError(f"{Path(compiler).name} failed: {(proc.stderr or proc.stdout)[-600:]}")
    partial.replace(exe)        # another run building at once ends with the same file
    return exe


def checked_output(text: str, program: str, key: str, timings, error) -> dict:
    """The JSON object a reference program printed (the last line of
    ``text`` that holds one), checked: the program's own checks passed
    ("ok") and ``doc[key]`` holds a positive number for each of
    ``timings``. Raises ``error`` (the caller's exception class) saying
    what is wrong."""
    lines = [line for line in text.strip().splitlines() if line.lstrip().startswith("{")]
    if not lines:
        raise error(f"no JSON object in the {program} program's output: {text[-300:]!r}")
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise error(f"the {program} program printed invalid JSON: {e}") from None
    if not doc.get("ok", False):
        raise error(f"the {program} program's checks failed, its outputs were wrong: {doc.get('errors')}")
    values = doc.get(key) or {}
    missing = [k for k in timings if not isinstance(values.get(k), (int, float)) or not values[k] > 0]
    if missing:
        raise error(f"the {program} program gave no valid time for {missing}")
    return doc
