"""Slang kernels: ``ctx.kernel(path_or_source, language="slang")`` compiles
with ``slangc`` to SPIR-V 1.3, which then goes through the same
reflection, checks, pipeline cache and hot reload as GLSL.

Where slangc comes from, in this order: ``GUESTCOMPUTE_SLANGC``, ``slangc``
on the PATH (the Vulkan SDK ships one), the standalone ``slangc`` inside
the ``slangtorch`` wheel (found without importing it). No pip package is a
clean dependency for it: ``slangtorch`` declares torch as a requirement
(gigabytes) although its slangc needs nothing of it — ``pip install
--no-deps slangtorch`` brings the compiler alone (15 MB) —, and ``slangpy``
carries the compiler library but no executable and compiles through a
device of its own. So there is no ``guestcompute[slang]`` extra; the docs
say how to get slangc.

Flags: ``-O0``, because slangc's optimiser is a library (``spirv-opt``)
that slangtorch's wheel does not ship (the driver optimises the SPIR-V in
any case); ``-g0``, and the remaining debug instructions (OpSource names
Slang as a source language the validators of Debian 12 reject) are
stripped. ``-depfile`` tells which files the kernel read (``#include`` and
``import``): hot reload watches them, and the SPIR-V cache key covers their
contents — a small manifest per kernel text remembers the list between
processes, so an unchanged kernel never compiles twice.

Errors come back as a KernelCompileError with slangc's file:line:column
and the source line.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
from pathlib import Path

from ..errors import CompilerNotFoundError, KernelCompileError
from .compile_errors import Diagnostic

_DEBUG_OPS = {2, 3, 4, 7, 8, 317, 330}    # OpSourceContinued, OpSource, OpSourceExtension, OpString, OpLine,
#                                           OpNoLine, OpModuleProcessed
_ERROR = re.compile(r"^(error|warning)(?:\[\w+\])?: (.*)$")
_WHERE = re.compile(r"^\s*-->\s*(.+):(\d+):(\d+)\s*$")
_OLD_STYLE = re.compile(r"^(.+)\((\d+)\): (error|warning) \d+: (.*)$")


def slangc_path() -> str:
    env = os.environ.get("GUESTCOMPUTE_SLANGC")
    if env:
        return env
    found = shutil.which("slangc")
    if found:
        return found
    spec = importlib.util.find_spec("slangtorch")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            exe = Path(root) / "bin" / "slangc"
            if exe.is_file() and os.access(exe, os.X_OK):
                return str(exe)
    raise CompilerNotFoundError("Slang kernels need slangc: set GUESTCOMPUTE_SLANGC, put the Vulkan SDK's slangc "
                                "on the PATH, or `pip install --no-deps slangtorch` (its wheel carries a "
                                "standalone slangc)")


def strip_debug(spirv: bytes) -> bytes:
    """``spirv`` without its debug instructions (source text, file names, lines)."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    out, i = list(words[:5]), 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        if op not in _DEBUG_OPS:
            out.extend(words[i:i + count])
        i += count
    return struct.pack(f"<{len(out)}I", *out)


def diagnostics(output: str, name_of) -> list:
    """slangc's messages as Diagnostics; ``name_of(path)`` names a file as
    the kernel's messages show it, and gives its lines."""
    found, pending = [], None
    for raw in output.splitlines():
        m = _ERROR.match(raw)
        if m:
            pending = (m.group(1), m.group(2).strip())
            continue
        w = _WHERE.match(raw)
        old = _OLD_STYLE.match(raw)
        if w and pending:
            file, line, col, (severity, what) = w.group(1), int(w.group(2)), int(w.group(3)), pending
            pending = None
        elif old:
            file, line, col, severity, what = old.group(1), int(old.group(2)), None, old.group(3), old.group(4)
        else:
            continue
        shown, lines = name_of(file)
        text = lines[line - 1] if 0 < line <= len(lines) else None
        found.append(Diagnostic(shown, line, col, severity, what, text))
    return found


# The first line of every rendered built-in Slang kernel (kernels/spec.py):
# how the SPIR-V cache tells a Slang source from a GLSL one (GLSL starts
# with #version).
SLANG_FIRST_LINE = "// guestcompute built-in kernel: Slang"
# How built-in Slang kernels compile: SPIR-V 1.5, whose StorageBuffer
# class the cooperative-vector instructions need (at 1.3 slangc declares
# byte-address buffers in the Uniform class, which they refuse).
BUILTIN_FLAGS = ("-target", "spirv", "-profile", "spirv_1_5", "-entry", "main", "-stage", "compute", "-O0", "-g0")


def compile_builtin(text: str) -> bytes:
    """SPIR-V of a built-in kernel's rendered Slang (KernelSpec.render);
    KernelCompileError with slangc's words when it fails."""
    import subprocess, tempfile     # as compile_glsl: only when compiling
    exe = slangc_path()
    with tempfile.TemporaryDirectory(prefix="guestcompute-") as tmp:
        src, out = Path(tmp) / "kernel.slang", Path(tmp) / "kernel.spv"
        src.write_text(text, encoding="utf-8")
        proc = subprocess.run([exe, str(src), *BUILTIN_FLAGS, "-o", str(out)], capture_output=True,
                              encoding="utf-8", errors="replace")
        said = (proc.stderr + proc.stdout).strip()
        if proc.returncode != 0 or not out.is_file():
            raise KernelCompileError(f"a built-in Slang kernel failed to compile (slangc says):\n{said}",
                                     output=said, tool="slangc")
        return strip_debug(out.read_bytes())


def _deps(depfile: Path) -> list:
    try:
        text = depfile.read_text()
    except OSError:
        return []
    body = text.split(":", 1)[1] if ":" in text else ""
    return [p.replace("\\ ", " ") for p in re.findall(r"(?:\\ |[^\s])+", body.replace("\\\n", " "))]


class SlangCompiler:
    """Compiles Slang kernels, with a key over every file each one read.

    Thread-safety: any thread (compiles are independent subprocesses)."""

    def __init__(self, spirv_cache):
        self.cache = spirv_cache

    def _full_key(self, base: str, deps: list):
        digest = hashlib.sha256(base.encode())
        for p in deps:
            try:
                digest.update(p.encode() + b"\0" + Path(p).read_bytes())
            except OSError:
                return None
        return digest.hexdigest()

    def compile(self, text: str, path: Path | None, name: str, entry: str, include_dirs, defines: list,
                lines_of) -> tuple:
        """(SPIR-V, cache key, files read) of a Slang kernel: ``text`` (read
        from ``path`` when it is a file)."""
        exe = slangc_path()
        flags = ["-target", "spirv", "-profile", "spirv_1_3", "-entry", entry, "-stage", "compute", "-O0", "-g0"]
        flags += [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines]
        base = hashlib.sha256(json.dumps([exe, flags, str(path) if path else "", text]).encode()).hexdigest()
        known = self.cache.manifest(base)
        if known is not None:
            key = self._full_key(base, known)
            hit = self.cache.lookup(key) if key else None
            if hit is not None:
                return hit, key, tuple(Path(p) for p in known)
        import subprocess, tempfile     # as compile_glsl: only when compiling
        with tempfile.TemporaryDirectory(prefix="guestcompute-") as tmp:
            src = path if path is not None else Path(tmp) / "kernel.slang"
            if path is None:
                src.write_text(text, encoding="utf-8")
            out, depfile = Path(tmp) / "kernel.spv", Path(tmp) / "kernel.d"
            proc = subprocess.run([exe, str(src), *flags, "-o", str(out), "-depfile", str(depfile)],
                                  capture_output=True, encoding="utf-8", errors="replace")
            said = (proc.stderr + proc.stdout).strip()
            if proc.returncode != 0 or not out.is_file():
                found = [d for d in diagnostics(said, lines_of) if d.severity == "error"]
                body = "\n".join(str(d) for d in found) if found else said
                raise KernelCompileError(f"kernel {name} failed to compile; fix the source (slangc says):\n{body}",
                                         found, said, "slangc")
            spirv = strip_debug(out.read_bytes())
            deps = [p for p in _deps(depfile) if path is not None or Path(p) != src]
        key = self._full_key(base, deps) or base
        self.cache.store(key, spirv)
        self.cache.remember_manifest(base, deps)
        return spirv, key, tuple(Path(p) for p in deps)
