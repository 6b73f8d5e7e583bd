"""Run the benchmark suite and write its report.

    python -m benchmarks.run [--quick] [--device NAME] [--out DIR] [--only SECTION,...] [--json]

Where torch has CUDA, the run holds a CUDA context throughout so that the
GPU clocks as it does for the CUDA baselines (see
``gpu_ops.hold_cuda_context``); the report's meta says whether it did.

Writes ``bench-<device>.json``, ``bench-<device>.md`` and ``bench-<device>.png``
into ``--out`` (default ``bench-results``) and prints a summary. A section
that fails is reported as skipped with its error; the others still run.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import integrations, report
from .gpu_ops import hold_cuda_context
from .plot import write_chart
from .results import skipped

# (section, how to run it)
SECTIONS = (
    ("record", "benchmarks.record_cost"),
    ("replay", integrations.program_replay),
    ("reuse", "benchmarks.kernel_reuse"),
    ("memory", "benchmarks.memory"),
    ("pipeline-cache", integrations.pipeline_cache),
    ("handoff", integrations.handoff),
    ("gpu-ops", "benchmarks.gpu_ops"),
    ("gpu-ops", "benchmarks.matmul_reference"),
    ("sort", "benchmarks.sort"),
    ("fft", "benchmarks.fft"),
    ("neural", "benchmarks.neural_encodings"),
    ("images", "benchmarks.images"),
    ("demo", "benchmarks.demo_frames"),
    ("torch", "benchmarks.torch_interop"),
    ("neural", "benchmarks.neural_mlp"),
    ("neural", "benchmarks.neural_coopvec"),
    ("neural", "benchmarks.neural_coopmat"),
    ("kernels", "benchmarks.hot_reload"),
    ("prints", "benchmarks.kernel_prints"),
)


def device_info(device) -> dict:
    from guestcompute.context import Context
    ctx = Context.create(device)
    try:
        lim = ctx.limits
        return {"device": lim.device_name, "driver": _driver_version(lim.vendor_id, lim.driver_version),
                "api": ".".join(map(str, lim.api_version)),
                "vendor_id": lim.vendor_id, "device_type": lim.device_type}
    finally:
        ctx.close()


def _driver_version(vendor: int, v: int) -> str:
    if vendor == 0x10DE:        # NVIDIA packs 10.8.8.6 bits
        return f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF:02d}"
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def slug(device_name: str) -> str:
    name = device_name.lower()
    if "llvmpipe" in name:
        return "lavapipe"
    for gpu in re.findall(r"[a-z]*\d+[a-z0-9]*", name):
        if gpu not in ("nvidia", "amd", "intel"):
            return gpu
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:24] or "device"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="guestcompute bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    p.add_argument("--device", help="device name substring or index (default: the best GPU, else lavapipe)")
    p.add_argument("--out", default="bench-results", help="folder for the JSON, markdown and PNG report")
    p.add_argument("--only", help="comma-separated sections: " + ", ".join(s for s, _ in SECTIONS))
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the summary")
    args = p.parse_args(argv)
    device = args.device if args.device is not None else os.environ.get("GUESTCOMPUTE_DEVICE")
    wanted = None if not args.only else {s.strip() for s in args.only.split(",")}
    if wanted and wanted - {s for s, _ in SECTIONS}:
        p.error(f"unknown section(s) {sorted(wanted - {s for s, _ in SECTIONS})}")
    env = argparse.Namespace(quick=args.quick, device=device, out=args.out)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())   # quiets loader warnings

    cuda_context = hold_cuda_context()    # kept until the run ends
    meta = device_info(device)
    meta["cuda_context_held"] = cuda_context is not None
    meta.update(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), commit=_commit(),
                python=platform.python_version(), cpu_count=os.cpu_count(), quick=args.quick)
    results = []
    for section, how in SECTIONS:
        if wanted and section not in wanted:
            continue
        t0 = time.perf_counter()
        log(f"[{section}] running…", args.json)
        try:
            rows = how(env) if callable(how) else importlib.import_module(how).run(env)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            rows = [skipped(section, f"{section} benchmark", f"failed: {type(e).__name__}: {e}")]
        results += rows
        log(f"[{section}] {time.perf_counter() - t0:.1f} s", args.json)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{slug(meta['device'])}"
    (out / f"{stem}.json").write_text(report.to_json(meta, results))
    (out / f"{stem}.md").write_text(report.to_markdown(meta, results, image=f"{stem}.png"))
    write_chart(out / f"{stem}.png", f"guestcompute benchmarks - {meta['device']} - {meta['date']}", results)
    if args.json:
        print(report.to_json(meta, results))
    else:
        print(f"\n{meta['device']} ({meta['date']})")
        print(report.summary(results))
        print(f"\nwrote {out / stem}.json, .md, .png")
    return 0


def _commit() -> str:
    """The checkout's short commit ("+" when it has uncommitted changes), or "?"."""
    import subprocess
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (head + ("+" if dirty else "")) if head else "?"


def log(msg: str, quiet_stdout: bool) -> None:
    print(msg, file=sys.stderr if quiet_stdout else sys.stdout, flush=True)


if __name__ == "__main__":
    sys.exit(main())
