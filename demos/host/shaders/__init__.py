"""GLSL sources of the host renderer and their precompiled SPIR-V.

The ``.spv`` files next to the ``.glsl``-style sources (``points.vert``,
``points.frag``) are what the renderer loads, so it runs without a shader
compiler installed. After editing a source, regenerate them with::

    python -m demos.host.shaders

which calls :func:`regenerate` (needs ``glslc`` on PATH).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SHADER_DIR = Path(__file__).resolve().parent
SOURCES = ("points.vert", "points.frag", "points_over.frag", "backdrop.vert", "backdrop.frag")

# SPIR-V for Vulkan 1.0 so the same binaries load on any device we accept.
GLSLC_ARGS = ("--target-env=vulkan1.0", "-O")


def compile_source(source: Path) -> bytes:
    """Compile one GLSL file with glslc and return the SPIR-V bytes."""
    glslc = shutil.which("glslc")
    if glslc is None:
        raise RuntimeError(
            f"glslc not found; cannot compile {source.name}. Install the "
            "shaderc tools or use the shipped .spv files.")
    result = subprocess.run(
        [glslc, *GLSLC_ARGS, str(source), "-o", "-"],
        check=False, capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"glslc failed for {source.name}:\n{result.stderr.decode(errors='replace')}")
    return result.stdout


def regenerate() -> list[Path]:
    """Recompile every source into its ``<name>.spv`` file; returns the paths."""
    written = []
    for name in SOURCES:
        out = SHADER_DIR / f"{name}.spv"
        out.write_bytes(compile_source(SHADER_DIR / name))
        written.append(out)
    return written


def load_spirv(name: str) -> bytes:
    """SPIR-V bytes for ``name`` (e.g. ``"points.vert"``).

    Uses the shipped ``.spv`` file; falls back to compiling the source when
    the binary is missing.
    """
    spv = SHADER_DIR / f"{name}.spv"
    if spv.exists():
        code = spv.read_bytes()
    else:
        code = compile_source(SHADER_DIR / name)
    if len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
        raise RuntimeError(f"{spv.name} is not a SPIR-V module")
    return code
