"""Compute kernels the demos hand to guestcompute with ``ctx.kernel``.

Each ``<name>.comp`` (GLSL) ships with its SPIR-V, ``<name>.comp.spv``.
:func:`source` gives ``ctx.kernel`` the GLSL text when ``glslc`` is
installed (guestcompute compiles it once into its content-addressed cache)
and the shipped SPIR-V otherwise, so the demos also run on machines without
a shader compiler. After editing a kernel, regenerate the SPIR-V with
``python -m demos.kernels`` (tests/test_demos.py checks it is current).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..host.shaders import compile_source

KERNEL_DIR = Path(__file__).resolve().parent
NAMES = ("lorenz", "bloom_composite", "ripples", "ocean_spectrum", "ocean_points")


def compile_glsl(name: str) -> bytes:
    """SPIR-V of ``<name>.comp``, compiled the way the renderer's own shaders
    are (Vulkan 1.0 target, so it loads on any device; raises without glslc)."""
    return compile_source(KERNEL_DIR / f"{name}.comp")


def shipped_spirv(name: str) -> bytes:
    return (KERNEL_DIR / f"{name}.comp.spv").read_bytes()


def source(name: str):
    """What to pass to ``ctx.kernel``: GLSL text (str) or SPIR-V (bytes)."""
    if shutil.which("glslc") is not None:
        return (KERNEL_DIR / f"{name}.comp").read_text()
    return shipped_spirv(name)


def watched(ctx, file: str, **kwargs):
    """``ctx.kernel`` of ``<file>.comp`` from the file itself, reloaded whenever the
    file is saved (needs glslc): a good edit shows from the next frame, a
    broken one is printed with its file:line:column and changes nothing."""
    if shutil.which("glslc") is None:
        raise SystemExit("--watch compiles the demo's kernels as they are edited: it needs glslc")

    def report(kernel, error):
        if error is None:
            print(f"reloaded {kernel.name} (version {kernel.version})", flush=True)
        else:
            print(f"{kernel.name}: the edit did not compile; still running the last good version\n{error}",
                  flush=True)
    return ctx.kernel(KERNEL_DIR / f"{file}.comp", watch=True, on_reload=report, **kwargs)


def regenerate() -> list[Path]:
    written = []
    for name in NAMES:
        path = KERNEL_DIR / f"{name}.comp.spv"
        path.write_bytes(compile_glsl(name))
        written.append(path)
    return written
