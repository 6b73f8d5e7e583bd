"""VkFFT on the same GPU, as the second reference of the ``fft`` section.

VkFFT is a header-only C library; its CUDA backend compiles its kernels at
plan time with NVRTC, so ``baselines/vkfft_fft.cu`` is host code that plans
and times the section's transforms. It is built with nvcc against the
headers in the folder named by ``GUESTCOMPUTE_VKFFT_INCLUDE`` (the folder
holding ``vkFFT.h``; the pyvkfft source distribution carries them under
``src/VkFFT/vkFFT``), once per machine (:mod:`benchmarks.nvcc_build`), and
run in a child process that prints one JSON object, which :func:`parse`
checks.

Nothing here makes up a number: without the headers or ``nvcc``, or when
the build, the run or the program's own checks fail, :func:`measure`
returns no reference and says why, and the section leaves those rows out.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import nvcc_build

SOURCE = Path(__file__).resolve().parent / "baselines" / "vkfft_fft.cu"
INCLUDE_ENV = "GUESTCOMPUTE_VKFFT_INCLUDE"
CASES = ("c2c_2d_1024x1024x32", "r2c_2d_1024x1024x32", "c2r_2d_1024x1024x32", "c2c_1d_256", "c2c_1d_1024",
         "c2c_1d_4096", "c2c_2d_512_single", "c2r_2d_512x6")
RUN_TIMEOUT_S = 900


class VkfftError(Exception):
    """The VkFFT program could not be built or run, or printed something that
    is not a valid measurement. ``str(e)`` says which."""


@dataclass(frozen=True)
class VkfftReference:
    """One run of the VkFFT program: median µs of one transform, keyed by
    :data:`CASES`."""
    device: str
    version: int
    us: dict

    @property
    def label(self) -> str:
        """"VkFFT 1.3.4 (CUDA)" from the packed version number."""
        v = self.version
        return f"VkFFT {v // 10000}.{v // 100 % 100}.{v % 100} (CUDA)"


def parse(text: str) -> VkfftReference:
    """The program's JSON (the last line of ``text`` that holds an object),
    checked: its own correctness checks passed and every case has a time."""
    lines = [line for line in text.strip().splitlines() if line.lstrip().startswith("{")]
    if not lines:
        raise VkfftError(f"no JSON object in the VkFFT program's output: {text[-300:]!r}")
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise VkfftError(f"the VkFFT program printed invalid JSON: {e}") from None
    if not doc.get("ok", False):
        raise VkfftError(f"the VkFFT program failed: {doc.get('errors')}")
    us = doc.get("us") or {}
    missing = [k for k in CASES if not isinstance(us.get(k), (int, float)) or not us[k] > 0]
    if missing:
        raise VkfftError(f"the VkFFT program gave no valid time for {missing}")
    try:
        return VkfftReference(str(doc["device"]), int(doc["vkfft_version"]), {k: float(us[k]) for k in CASES})
    except (KeyError, TypeError, ValueError) as e:
        raise VkfftError(f"the VkFFT program's JSON lacks a field: {e!r}") from None


def headers(folder: Path) -> bytes:
    """Every header under ``folder``, in a stable order, for the build's key."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*.h")))


def build(nvcc: str, include: Path, folder: Path | None = None) -> Path:
    flags = ["-O3", "-std=c++17", "-DVKFFT_BACKEND=1", f"-I{include}"]
    try:
        return nvcc_build.build(nvcc, SOURCE, flags, ["-lcuda", "-lnvrtc"], headers(include), folder)
    except nvcc_build.BuildError as e:
        raise VkfftError(str(e)) from None


def measure(rounds: int) -> tuple:
    """``(VkfftReference, "")``, or ``(None, why)`` when there is none."""
    include = os.environ.get(INCLUDE_ENV, "")
    if not include:
        return None, f"VkFFT reference not run: {INCLUDE_ENV} names no VkFFT headers"
    if not (Path(include) / "vkFFT.h").is_file():
        return None, f"VkFFT reference not run: no vkFFT.h in {INCLUDE_ENV}={include}"
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None, "VkFFT reference not run: nvcc not on PATH"
    try:
        exe = build(nvcc, Path(include))
        proc = subprocess.run([str(exe), str(rounds)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if proc.returncode != 0 and not proc.stdout.strip():
            raise VkfftError(f"the VkFFT program exited with {proc.returncode}: {proc.stderr[-400:]}")
        return parse(proc.stdout), ""
    except VkfftError as e:
        return None, f"VkFFT reference not run: {e}"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"VkFFT reference not run: {type(e).__name__}: {e}"
