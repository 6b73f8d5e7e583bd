"""CUB on the same GPU, as the baseline of the ``sort`` section.

``baselines/cub_sort.cu`` is built with ``nvcc -O3 -arch=native`` (once
per machine: :mod:`benchmarks.program_build`) and run in a child process; it
prints one JSON object, which :func:`parse` checks.

Nothing here makes up a number: without ``nvcc`` on PATH, or when the build
or the run fails, :func:`measure` returns no baseline and says why, and the
section reports the rows that need it as skipped.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import program_build

SOURCE = Path(__file__).resolve().parent / "baselines" / "cub_sort.cu"
TIMINGS = ("sort_keys", "sort_pairs", "sort_pairs_small", "inclusive_sum", "select_flagged", "memcpy",
           "skeleton_tile_scan", "skeleton_lookback_scan")
RUN_TIMEOUT_S = 600


class BaselineError(Exception):
    """The CUB program could not be built or run, or printed something that
    is not a valid measurement. ``str(e)`` says which."""


@dataclass(frozen=True)
class CubBaseline:
    """One run of the CUB program: medians in milliseconds (``ms``, keyed
    by :data:`TIMINGS`) for ``n`` keys (``small_pairs`` for the small
    key-value sort) and a ``copy_bytes`` memcpy."""
    device: str
    n: int
    small_pairs: int
    copy_bytes: int
    selected: int
    ms: dict
    cub_version: int
    cuda_runtime: int

    @property
    def label(self) -> str:
        """"CUB 3.0.0, CUDA 13.0" from the packed version numbers."""
        v, r = self.cub_version, self.cuda_runtime
        return f"CUB {v // 100000}.{v // 100 % 1000}.{v % 100}, CUDA {r // 1000}.{r % 1000 // 10}"

    @property
    def copy_bandwidth(self) -> float:
        """Bytes read + written per second by the device-to-device memcpy."""
        return 2 * self.copy_bytes / (self.ms["memcpy"] / 1e3)


def parse(text: str) -> CubBaseline:
    """The program's JSON (the last line of ``text`` that holds an object),
    checked: every timing present and positive, and the program's own checks
    of its outputs passed."""
    doc = program_build.checked_output(text, "CUB", "ms", TIMINGS, BaselineError)
    ms = doc["ms"]
    try:
        return CubBaseline(str(doc["device"]), int(doc["n"]), int(doc["small_pairs"]), int(doc["copy_bytes"]),
                           int(doc["selected"]), {k: float(ms[k]) for k in TIMINGS},
                           int(doc.get("cub_version", 0)), int(doc.get("cuda_runtime", 0)))
    except (KeyError, TypeError, ValueError) as e:
        raise BaselineError(f"the CUB program's JSON lacks a field: {e!r}") from None


def build(nvcc: str, folder: Path | None = None) -> Path:
    """The built program (compiled once per source, compiler and GPUs)."""
    try:
        return program_build.build(nvcc, SOURCE, ["-O3", "-arch=native", "-std=c++17"], folder=folder)
    except program_build.BuildError as e:
        raise BaselineError(str(e)) from None


def measure(n: int, small_pairs: int, reps: int, copy_bytes: int = 1 << 30) -> tuple:
    """``(CubBaseline, "")``, or ``(None, why)`` when there is none."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None, "CUB baseline missing: nvcc not on PATH"
    try:
        exe = build(nvcc)
        proc = subprocess.run([str(exe), str(n), str(small_pairs), str(reps), str(copy_bytes)],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if proc.returncode != 0:
            raise BaselineError(f"the CUB program exited with {proc.returncode}: {proc.stderr[-400:]}")
        return parse(proc.stdout), ""
    except BaselineError as e:
        return None, f"CUB baseline missing: {e}"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"CUB baseline missing: {type(e).__name__}: {e}"
