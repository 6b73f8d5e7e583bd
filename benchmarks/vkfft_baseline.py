"""VkFFT on the same GPU, as the second reference of the ``fft`` section,
through two of its backends:

- ``vulkan``: the same API and driver as guestcompute (VkFFT writes GLSL at
  plan time and compiles it with glslang), built with the C++ compiler
  (``CXX``, default ``c++``) against glslang's and SPIRV-Tools' static
  libraries and the Vulkan loader (Debian: ``glslang-dev spirv-tools
  libvulkan-dev``; glslang's headers where ``GUESTCOMPUTE_GLSLANG_INCLUDE``
  says, default ``/usr/include/glslang/Include``);
- ``cuda``: VkFFT compiling CUDA with NVRTC, built with nvcc.

Both programs (``baselines/vkfft_vulkan.cpp``, ``baselines/vkfft_fft.cu``,
sharing ``baselines/vkfft_cases.h``) need VkFFT's headers, from the folder
``GUESTCOMPUTE_VKFFT_INCLUDE`` names (the one holding ``vkFFT.h``; the
pyvkfft source distribution carries them under ``src/VkFFT/vkFFT``). Each is
built once per machine (:mod:`benchmarks.program_build`) and run in a child
process that prints one JSON object, which :func:`parse` checks.

Nothing here makes up a number: without the headers or a compiler, or when
the build, the run or the program's own checks fail, :func:`prepare` or
:func:`run` returns no reference and says why, and the section says so in a skipped row.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import program_build

BASELINES = Path(__file__).resolve().parent / "baselines"
SOURCES = {"cuda": BASELINES / "vkfft_fft.cu", "vulkan": BASELINES / "vkfft_vulkan.cpp"}
SHARED = BASELINES / "vkfft_cases.h"
INCLUDE_ENV = "GUESTCOMPUTE_VKFFT_INCLUDE"
GLSLANG_ENV = "GUESTCOMPUTE_GLSLANG_INCLUDE"
GLSLANG_LIBS = ("-Wl,--start-group", "-lglslang", "-lMachineIndependent", "-lOSDependent", "-lGenericCodeGen",
                "-lOGLCompiler", "-lSPIRV", "-lglslang-default-resource-limits", "-lSPIRV-Tools-opt",
                "-lSPIRV-Tools", "-Wl,--end-group", "-lvulkan", "-lpthread")
CASES = ("c2c_2d_1024x1024x32", "r2c_2d_1024x1024x32", "c2r_2d_1024x1024x32", "c2c_1d_256", "c2c_1d_1024",
         "c2c_1d_4096", "c2c_2d_512_single", "c2r_2d_512x6")
RUN_TIMEOUT_S = 900


class VkfftError(Exception):
    """A VkFFT program could not be built or run, or printed something that
    is not a valid measurement. ``str(e)`` says which."""


@dataclass(frozen=True)
class VkfftReference:
    """One run of a VkFFT program: median µs of one transform, keyed by
    :data:`CASES`."""
    device: str
    backend: str
    version: int
    us: dict

    @property
    def label(self) -> str:
        """"VkFFT 1.3.4 (Vulkan)" from the packed version number."""
        v = self.version
        return f"VkFFT {v // 10000}.{v // 100 % 100}.{v % 100} ({'CUDA' if self.backend == 'cuda' else 'Vulkan'})"


def parse(text: str) -> VkfftReference:
    """The program's JSON (the last line of ``text`` that holds an object),
    checked: its own correctness checks passed and every case has a time."""
    doc = program_build.checked_output(text, "VkFFT", "us", CASES, VkfftError)
    us = doc["us"]
    try:
        return VkfftReference(str(doc["device"]), str(doc["backend"]), int(doc["vkfft_version"]),
                              {k: float(us[k]) for k in CASES})
    except (KeyError, TypeError, ValueError) as e:
        raise VkfftError(f"the VkFFT program's JSON lacks a field: {e!r}") from None


def headers(folder: Path) -> bytes:
    """Every header under ``folder``, in a stable order, for the build's key."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*.h")))


def build(backend: str, include: Path, folder: Path | None = None) -> Path:
    """The built program of ``backend``; VkfftError when its compiler is
    missing or fails."""
    flags = ["-O3" if backend == "cuda" else "-O2", "-std=c++17", f"-DVKFFT_BACKEND={0 if backend == 'vulkan' else 1}",
             f"-I{include}"]
    if backend == "cuda":
        compiler, libraries = shutil.which("nvcc"), ["-lcuda", "-lnvrtc"]
    else:
        compiler, libraries = shutil.which(os.environ.get("CXX", "c++")), list(GLSLANG_LIBS)
        flags.append(f"-I{os.environ.get(GLSLANG_ENV, '/usr/include/glslang/Include')}")
    if compiler is None:
        raise VkfftError(f"{'nvcc' if backend == 'cuda' else os.environ.get('CXX', 'c++')} not on PATH")
    try:
        return program_build.build(compiler, SOURCES[backend], flags, libraries, SHARED.read_bytes() + headers(include),
                                folder)
    except program_build.BuildError as e:
        raise VkfftError(str(e)) from None


def not_run(backend: str, why) -> tuple:
    """``(None, why)``: no reference from ``backend``, and the reason."""
    return None, f"VkFFT ({backend}) reference not run: {why}"


def prepare(backend: str) -> tuple:
    """``(the built program of backend, "")``, built now unless cached, or
    ``not_run(...)``. It only compiles (no GPU), so the section runs it
    while the GPU times other work."""
    include = os.environ.get(INCLUDE_ENV, "")
    if not include:
        return not_run(backend, f"{INCLUDE_ENV} names no VkFFT headers")
    if not (Path(include) / "vkFFT.h").is_file():
        return not_run(backend, f"no vkFFT.h in {INCLUDE_ENV}={include}")
    try:
        return build(backend, Path(include)), ""
    except VkfftError as e:
        return not_run(backend, e)
    except (OSError, subprocess.SubprocessError) as e:
        return not_run(backend, f"{type(e).__name__}: {e}")


def run(exe: Path, backend: str, rounds: int, device: str = "") -> tuple:
    """``(VkfftReference, "")`` from the built program ``exe`` of
    ``backend`` ("vulkan": on the Vulkan device whose name contains
    ``device``), or ``not_run(...)``."""
    args = [str(exe), str(rounds), "full"] + ([device] if backend == "vulkan" and device else [])
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if proc.returncode != 0 and not proc.stdout.strip():
            raise VkfftError(f"the VkFFT program exited with {proc.returncode}: {proc.stderr[-400:]}")
        return parse(proc.stdout), ""
    except VkfftError as e:
        return not_run(backend, e)
    except (OSError, subprocess.SubprocessError) as e:
        return not_run(backend, f"{type(e).__name__}: {e}")
