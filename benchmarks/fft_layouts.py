"""The fixed FFT kernels' thread layouts, and the 2-D transforms' grouping
of planes, measured side by side.

Not a goal row: a probe for choosing ``ops/fft_fixed.layout`` and how a
batch of 2-D transforms is recorded. Each variant (``VARIANTS``) runs in a
child process of its own (the kernels are generated from the layout, so a
variant is a different set of pipelines, and a process per variant keeps
one variant's caches and clocks out of the next one's). The child replaces
``fft_fixed.layout`` for the lengths the variant names (and, where it says,
``fft_fixed.SPLIT_ABOVE``), then times on 32 planes of 1,024²:

- ``rows 256``, ``rows``, ``rows 4096``: ``rec.fft`` along rows of 256,
  1,024 and 4,096 points of the same bytes, the fft section's batched rows;
- ``columns``: ``rec.fft(x, axis=-2)``, the columns pass alone, out of place;
- ``columns in place``: the same pass on its own output (scaled as
  ``norm="ortho"``), as the 2-D transforms run it after their rows pass;
- ``fft2``, ``rfft2``, ``irfft2``: the 2-D transforms of the fft section,
  all planes in one call or, where the variant says, a few planes a call
  (so that what a plane's rows pass wrote may still be in the L2 cache
  when its columns pass reads it),

each the better of two rounds, a round the median of five command buffers
timing 10 calls; the last plane of each 2-D transform, and the first plane
of the 256- and 4,096-point rows, is checked against numpy before any time
counts. The first variant (main's layout) also times a float32 ``rec.copy``
of the same bytes and, with torch on CUDA, cuFFT's 2-D transforms in the
same process. Main's layout runs again last, so drift over the run shows.

Run: ``python -m benchmarks.fft_layouts [--device NAME] [--planes N] [--quick]``
(prints one JSON object a variant, then a table); ``--variant NAME`` runs
one variant in this process.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np

from guestcompute.context import Context
from guestcompute.ops import fft_fixed

from .fft import check_close
from .gpu_ops import Timer, compute_copy_seconds, hold_cuda_context, torch_available, torch_seconds, warm_up

N = 1024
OTHER_ROWS = (256, 4096)            # the fft section's batched 1-D row lengths besides N ("rows")


@dataclass(frozen=True)
class Variant:
    """What a variant changes; None / empty: main's choice."""
    columns: tuple = None       # 1,024-point columns: (points an invocation, columns a workgroup)
    rows: dict = field(default_factory=dict)    # {row length: (points an invocation, rows a workgroup)}
    split_above: int = None     # bytes of rows above which a workgroup exchanges one part at a time
    chunk: int = None           # planes the 2-D transforms are recorded for at a time


VARIANTS = {
    "main": Variant(),
    "columns 16x8": Variant(columns=(16, 8)),
    "columns 16x4": Variant(columns=(16, 4)),
    "columns 8x4": Variant(columns=(8, 4)),
    "columns 8x8": Variant(columns=(8, 8)),
    "columns 16x4, whole exchange": Variant(columns=(16, 4), split_above=1 << 20),
    "rows 8x2": Variant(rows={1024: (8, 2)}),
    "rows 1024 16x4": Variant(rows={1024: (16, 4)}),
    "rows 256 8x8": Variant(rows={256: (8, 8)}),
    "rows 256 16x4": Variant(rows={256: (16, 4)}),
    "rows 256 8x2": Variant(rows={256: (8, 2)}),
    "rows 4096 8x1": Variant(rows={4096: (8, 1)}),
    "whole exchange": Variant(split_above=1 << 20),
    "2-D by 1 plane": Variant(chunk=1),
    "2-D by 2 planes": Variant(chunk=2),
    "2-D by 4 planes": Variant(chunk=4),
    "main again": Variant(),
}
CASES = ("rows 256", "rows", "rows 4096", "columns", "columns in place", "fft2", "rfft2", "irfft2")


def patched_layout(columns_layout, rows_layouts=None):
    """``fft_fixed.layout`` with the 1,024-point columns laid out as
    ``columns_layout`` (in place of the aligned form too) and rows of the
    lengths ``rows_layouts`` names as it gives (the narrow form and the
    others unchanged)."""
    main = fft_fixed.layout
    rows_layouts = rows_layouts or {}

    def layout(n: int, columns: bool, form: str = "") -> tuple:
        chosen = (columns_layout if n == N else None) if columns else rows_layouts.get(n)
        if form == "narrow" or chosen is None:
            return main(n, columns, form)
        per, rows = chosen
        return per, rows, fft_fixed.stage_radices(n, per)
    return layout


def _by_planes(op, src, dst, planes: int, chunk):
    """A body recording ``op`` over all planes at once, or ``chunk`` planes at a time."""
    if chunk is None or chunk >= planes:
        return lambda rec: op(rec)(src, out=dst)
    parts = [(src[k:k + chunk], dst[k:k + chunk]) for k in range(0, planes, chunk)]
    return lambda rec: [op(rec)(s, out=d) for s, d in parts]


def measure(ctx, planes: int, references: bool, quick: bool = False, chunk=None) -> dict:
    """µs of each of CASES (and, with ``references``, of the copy and
    cuFFT), plus the relative RMS error against numpy of each 2-D
    transform's last plane and of the first plane's 256- and 4,096-point
    rows. ``quick``: one call a case, once (to check that a variant runs);
    ``chunk``: the 2-D transforms recorded that many planes at a time."""
    rng = np.random.default_rng(1)
    x_np = (rng.random((planes, N, 2 * N), dtype=np.float32) - 0.5).view(np.complex64)
    r_np = np.ascontiguousarray(x_np.real)
    x, r = ctx.tensor(x_np), ctx.tensor(r_np)
    out_c, out_r = ctx.empty((planes, N, N), "complex64"), ctx.empty((planes, N, N), "float32")
    spec = ctx.empty((planes, N, N // 2 + 1), "complex64")
    bodies = {f"rows {n}": (lambda n: lambda rec: rec.fft(x.reshape(-1, n), out=out_c.reshape(-1, n)))(n)
              for n in OTHER_ROWS}
    bodies.update({
        "rows": lambda rec: rec.fft(x, axis=-1, out=out_c), "columns": lambda rec: rec.fft(x, axis=-2, out=out_c),
        # "ortho" keeps the values' size over many passes; it changes only a push constant
        "columns in place": lambda rec: rec.fft(out_c, axis=-2, norm="ortho", out=out_c),
        "fft2": _by_planes(lambda rec: rec.fft2, x, out_c, planes, chunk),
        "rfft2": _by_planes(lambda rec: rec.rfft2, r, spec, planes, chunk),
        "irfft2": _by_planes(lambda rec: rec.irfft2, spec, out_r, planes, chunk)})
    ctx.run(lambda rec: [bodies[case](rec) for case in ("fft2", "rfft2", "irfft2")])
    errors = {"fft2": check_close(out_c.numpy()[-1], np.fft.fft2(x_np[-1].astype(np.complex128)), "fft2"),
              "rfft2": check_close(spec.numpy()[-1], np.fft.rfft2(r_np[-1].astype(np.float64)), "rfft2"),
              "irfft2": check_close(out_r.numpy()[-1], r_np[-1], "irfft2 of rfft2")}
    for n in OTHER_ROWS:
        ctx.run(bodies[f"rows {n}"])
        errors[f"rows {n}"] = check_close(out_c[0].numpy().reshape(-1, n),
                                          np.fft.fft(x_np[0].reshape(-1, n).astype(np.complex128)), f"rows {n}")
    timer = Timer(ctx, 1, rounds=1) if quick else Timer(ctx, 10, rounds=5)
    if not quick:
        warm_up(ctx, 1.0)
    us = {}
    for _ in range(1 if quick else 2):
        for case in CASES:
            us[case] = min(us.get(case, float("inf")), timer.gpu_seconds(bodies[case]) * 1e6)
    if references:
        us["float32 copy"] = compute_copy_seconds(ctx, timer, 2 * x_np.size) * 1e6
        if torch_available():
            import torch
            tx, tr = torch.from_numpy(x_np).cuda(), torch.from_numpy(r_np).cuda()
            ts = torch.fft.rfft2(tr)
            for case, fn in (("cuFFT fft2", lambda: torch.fft.fft2(tx)), ("cuFFT rfft2", lambda: torch.fft.rfft2(tr)),
                             ("cuFFT irfft2", lambda: torch.fft.irfft2(ts))):
                us[case] = torch_seconds(fn, 10, graph=False) * 1e6
    return {"us": {k: round(v, 1) for k, v in us.items()}, "errors": errors}


def run_variant(name: str, device, planes: int, quick: bool = False) -> dict:
    """One variant, measured in this process."""
    v = VARIANTS[name]
    fft_fixed.layout = patched_layout(v.columns, v.rows)
    if v.split_above is not None:
        fft_fixed.SPLIT_ABOVE = v.split_above
    cuda_context = hold_cuda_context()
    ctx = Context.create(device)
    try:
        result = measure(ctx, planes, references=name == "main" and not quick, quick=quick, chunk=v.chunk)
        return {"variant": name, "device": ctx.limits.device_name, **result}
    finally:
        ctx.close()
        del cuda_context


def table(results: list) -> str:
    lines = ["| variant | " + " | ".join(CASES) + " |", "| --- |" + " --- |" * len(CASES)]
    for res in results:
        lines.append(f"| {res['variant']} | " + " | ".join(f"{res['us'][c]:.1f}" for c in CASES) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device")
    p.add_argument("--planes", type=int, default=32)
    p.add_argument("--variant", choices=tuple(VARIANTS))
    p.add_argument("--quick", action="store_true", help="one call a case, once: checks that each variant runs")
    args = p.parse_args(argv)
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.device, args.planes, args.quick)), flush=True)
        return 0
    results = []
    for name in VARIANTS:
        cmd = [sys.executable, "-m", "benchmarks.fft_layouts", "--variant", name, "--planes", str(args.planes)]
        cmd += (["--device", args.device] if args.device else []) + (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: exit {proc.returncode}: {proc.stderr[-600:]}", flush=True)
            continue
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
