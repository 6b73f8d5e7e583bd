"""The particle demo's GPU frame time by post-process route, in one run.

Each route renders the same frames headless (same particles, same
backdrop simulation); the renderer times every frame's command buffer with
two timestamps, and the median over the frames after the first is
reported:

- ``image``: bloom + tonemap of the rendered 8-bit image itself (image
  ops, no copies), against ``buffer``: the copy path it replaces (copy the
  frame into a buffer, bloom there, copy back). The two blooms differ (the
  ``rec.bloom`` mip chain against two quarter-resolution blurs and a user
  composite kernel), so this compares the routes a renderer author would
  pick between, not equal work; no goal.
- ``hdr``: the default, an rgba16f scene bloomed, auto-exposed and
  tone-mapped straight into the output — more work than either 8-bit route
  (a 16-bit scene, a five-level bloom, a luminance reduction), reported
  against the buffer path too, without a goal.
- ``none``: no post-process, in ``extra`` of each row — the frame's fixed
  cost (simulation, draw, the headless readback copy).
- ``sorted``: the ``hdr`` frame with translucent particles sorted back to
  front on the GPU every frame (``--sorted``), against the ``hdr`` frame;
  the sort's own GPU time (its timing scope) in the note. No goal.

Run: ``python -m benchmarks.demo_frames`` (or ``--only demo`` in the suite).
"""
from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from .gpu_ops import runs_on_cpu
from .results import Result, skipped, standalone_main

SECTION = "demo"
ROOT = Path(__file__).resolve().parents[1]


def _particles():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))       # the demos live next to the package
    from demos import particles
    return particles


def frame_result(particles, route: str, size, count: int, frames: int, device):
    """The demo's result for ``route`` ("sorted": the hdr route with ``--sorted``)."""
    argv = ["--headless", "--frames", str(frames), "--size", *map(str, size), "--particles", str(count)]
    argv += ["--no-bloom"] if route == "none" else ["--sorted"] if route == "sorted" else ["--bloom-route", route]
    if isinstance(device, str):
        argv += ["--device", device]
    with contextlib.redirect_stdout(io.StringIO()):
        result = particles.run(particles.parse_args(argv))
    if result.gpu_frame_ms is None:
        raise RuntimeError("the device has no timestamps on the renderer's queue")
    return result


def frame_ms(particles, route: str, size, count: int, frames: int, device) -> float:
    return frame_result(particles, route, size, count, frames, device).gpu_frame_ms


def sorted_row(particles, size, count: int, frames: int, device, hdr_ms: float, extra: dict) -> Result:
    name = f"frame with the particles sorted back to front ({size[0]}x{size[1]}, {count:,} particles)"
    try:
        result = frame_result(particles, "sorted", size, count, frames, device)
    except Exception as e:              # one row failing must not lose the others
        return skipped(SECTION, name, f"{type(e).__name__}: {e}")
    sort_ms = result.scopes_ms.get("depth sort")
    note = "translucent sprites, over blending; " + (
        f"the depth sort (rec.argsort into the index buffer): {sort_ms:.3f} ms GPU" if sort_ms is not None
        else "the sort itself untimed")
    return Result(SECTION, name, result.gpu_frame_ms, "ms GPU", "the hdr frame, additive and unsorted", hdr_ms,
                  note=note, extra=dict(extra, sort_ms=sort_ms))


def run(env) -> list:
    try:
        particles = _particles()
    except ImportError as e:            # glfw (the demos' window library) missing
        return [skipped(SECTION, "particle demo frame time", f"demos not importable: {e}")]
    if runs_on_cpu(env.device):
        size, count, frames = ((160, 120), 6000, 6) if env.quick else ((320, 240), 20000, 12)
    else:
        size, count, frames = ((1920, 1080), 1_000_000, 30) if env.quick else ((3840, 2160), 1_000_000, 120)
    ms = {route: frame_ms(particles, route, size, count, frames, env.device)
          for route in ("none", "buffer", "image", "hdr")}
    extra = {"size": list(size), "particles": count, "frames": frames, "none_ms": ms["none"]}
    where = f"{size[0]}x{size[1]}, {count:,} particles"
    return [
        Result(SECTION, f"frame with 8-bit bloom on the image itself ({where})", ms["image"], "ms GPU",
               "the copy path: image -> buffer, bloom, buffer -> image", ms["buffer"],
               note="different blooms: rec.bloom's mip chain vs two quarter-res blurs", extra=extra),
        Result(SECTION, f"frame with HDR bloom + auto-exposure + tonemap into the output ({where})", ms["hdr"],
               "ms GPU", "the copy path: image -> buffer, bloom, buffer -> image", ms["buffer"],
               note="more work than the 8-bit routes: rgba16f scene, 5-level bloom, luminance", extra=extra),
        sorted_row(particles, size, count, frames, env.device, ms["hdr"], extra),
    ]


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
