"""A user kernel's source to SPIR-V: GLSL text or a GLSL file (includes,
defines and prints expanded, then the SPIR-V cache), Slang (slangc), or
SPIR-V bytes (validated). What ``ctx.kernel`` asked for is a
:class:`Recipe`, so a hot reload repeats exactly the same steps.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidArgumentError, KernelCompileError, UnsupportedError
from ..spirv.compile_errors import Diagnostic, compile_error
from ..spirv.compiler import source_key, validate
from ..spirv.glsl_print import format_id, has_prints, rewrite as rewrite_prints
from ..spirv.glsl_source import (IncludeError, checked_defines, checked_dirs, display_name, expand,
                                 looks_like_path, read_text, text_name)
from ..spirv.slang import SlangCompiler

_MAGIC = 0x07230203


@dataclass(frozen=True)
class Recipe:
    """How a kernel was asked for in ``ctx.kernel``: what a reload repeats."""
    source: object
    entry: str
    workgroup: object
    push_layout: object
    defines: object
    include_dirs: object
    prints: bool = True
    language: str = "glsl"
    validate: bool = True          # spirv-val checks SPIR-V our own compiler did not write


def _target_env(ctx) -> str:
    # A Vulkan 1.1 device (as the host declared it) gets SPIR-V 1.3, so
    # kernels may use 16-bit storage and subgroup operations.
    return "vulkan1.1" if min(ctx.caps.api_version, ctx.limits.api_version) >= (1, 1) else "vulkan1.0"


def _glsl_spirv(ctx, recipe: Recipe, unchanged: str = None):
    """(SPIR-V, text key, files, prints) of the recipe's GLSL, or None where
    its compiled text's key is ``unchanged``. KernelCompileError saying where
    for a compile error or a bad #include."""
    try:
        src = expand(recipe.source, recipe.defines, recipe.include_dirs)
    except IncludeError as e:
        lines = src_lines_of(e.file, recipe.source)
        text = lines[e.line - 1] if 0 < e.line <= len(lines) else None
        d = Diagnostic(e.file, e.line, 1 if text else None, "error", e.message, text)
        raise KernelCompileError(f"kernel {e.file} failed to compile; fix the source:\n{d}", [d]) from None
    env = _target_env(ctx)
    text, prints = src.text, ()
    if has_prints(text):
        base = source_key(text, env)
        ids = lambda k: format_id(base, k)          # noqa: E731
        text, calls = rewrite_prints(text, src.name, ids, recipe.prints)
        prints = tuple((ids(k), call) for k, call in enumerate(calls))
    key = source_key(text, env)
    if key == unchanged:
        return None
    try:
        spirv = ctx.device.spirv.get(text, env)
    except KernelCompileError as e:
        raise compile_error(e.output, src, e.tool) from None
    return spirv, key, src.files, prints


def src_lines_of(file: str, source) -> list:
    """The lines of ``file`` as named in an include error (the kernel's own
    text when it was given as a string)."""
    if source is not None and not looks_like_path(source) and file == text_name(source):
        return source.splitlines()
    try:
        return Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _slang_spirv(ctx, recipe: Recipe, unchanged: str = None):
    """(SPIR-V, key, files, no prints) of a Slang kernel (spirv/slang.py), None where unchanged."""
    if _target_env(ctx) != "vulkan1.1":
        raise UnsupportedError("Slang kernels compile to SPIR-V 1.3, which needs a Vulkan 1.1 device (as the "
                               "host declared it)")
    source = recipe.source
    path = Path(source) if looks_like_path(source) else None
    if path is not None and not path.is_file():
        raise InvalidArgumentError(f"kernel file {display_name(path)} does not exist")
    text = read_text(path) if path is not None else source
    name = display_name(path) if path is not None else text_name(text)
    defines = [f"{k}={v}" for k, v in checked_defines(recipe.defines)]
    dirs = [str(d) for d in checked_dirs(recipe.include_dirs)]

    def lines_of(file: str) -> tuple:
        if path is None and Path(file).name == "kernel.slang":
            return name, text.splitlines()
        return display_name(Path(file)), src_lines_of(file, None)
    spirv, key, deps = SlangCompiler(ctx.device.spirv).compile(text, path, name, recipe.entry, dirs, defines,
                                                               lines_of)
    if key == unchanged:
        return None
    if recipe.validate:
        validate(spirv, _target_env(ctx))
    own = (path,) if path is not None else ()
    files = own + tuple(d for d in deps if path is None or d.resolve() != path.resolve())
    return spirv, key, files, ()


def source_spirv(ctx, recipe: Recipe, unchanged: str = None):
    """(SPIR-V, text key, files, prints) of the recipe's source, None where unchanged."""
    source = recipe.source
    if recipe.language == "slang":
        if not isinstance(source, (str, os.PathLike)):
            raise InvalidArgumentError("a Slang kernel is Slang text or a .slang file's path")
        return _slang_spirv(ctx, recipe, unchanged)
    if isinstance(source, (str, os.PathLike)):
        return _glsl_spirv(ctx, recipe, unchanged)
    if isinstance(source, (bytes, bytearray, memoryview)):
        if recipe.defines or recipe.include_dirs:
            raise InvalidArgumentError("defines and include_dirs apply to GLSL; this kernel is SPIR-V bytes")
        data = bytes(source)
        if len(data) >= 4 and len(data) % 4 == 0 and struct.unpack_from(">I", data)[0] == _MAGIC:
            # Written big-endian: Vulkan wants host (little-endian) words.
            data = struct.pack(f"<{len(data) // 4}I", *struct.unpack(f">{len(data) // 4}I", data))
        # Bytes from outside (not our compiler) are validated before the driver sees them.
        if recipe.validate:
            validate(data, ctx.device.pipelines.target_env)
        return data, "", (), ()
    raise InvalidArgumentError(f"kernel source must be GLSL text (str), a kernel file's path or SPIR-V bytes, "
                               f"got {type(source).__name__}")
