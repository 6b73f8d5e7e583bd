"""Pipeline creation for every built-in kernel: cold vs warm from the
persisted VkPipelineCache file.

Each phase runs in its own process, so nothing carries over in memory; the
two share one fresh cache directory. The cold process starts without a
pipeline cache file and saves one when it closes; the warm process loads
it. The drivers' own shader disk caches (Mesa's, NVIDIA's) are switched off
in both, so only guestcompute's file makes the difference
(``--keep-driver-caches`` leaves them on). SPIR-V comes from the baked
kernels: no glslc needed.

    python -m benchmarks.pipeline_cache [--threads 1] [--repeat 3] [--device NAME]

Prints one JSON document; ``ratio`` is cold / warm time inside
vkCreateComputePipelines (``wall_ratio``: of the whole warm-up call).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(phase: str, threads: int) -> dict:
    import guestcompute as gc
    from guestcompute.warmup import resolve

    t0 = time.perf_counter()
    ctx = gc.Context.create()
    try:
        specs, skipped = resolve(ctx, "all")
        t1 = time.perf_counter()
        for s in specs:                     # SPIR-V first, so it is not timed as pipeline creation
            ctx.device.spirv.get(s.render(), s.target_env)
        spirv_seconds = time.perf_counter() - t1
        report = ctx.warmup(specs, threads=threads)
        stats = ctx.cache_stats()
        device = ctx.limits.device_name
    finally:
        ctx.close()
    saved = ctx.cache_stats()
    created = stats["pipelines_created"]
    return {
        "phase": phase, "device": device, "specs": len(specs), "skipped_unsupported": skipped,
        "pipelines_created": created, "threads": threads,
        "driver_seconds": stats["pipeline_create_seconds"],
        "ms_per_pipeline": 1e3 * stats["pipeline_create_seconds"] / max(created, 1),
        "warmup_seconds": report.seconds, "spirv_seconds": spirv_seconds,
        "spirv_baked_hits": stats["spirv_baked_hits"], "spirv_compiles": stats["spirv_compiles"],
        "cache_file_loaded": stats["pipeline_cache_loaded"],
        "cache_bytes_loaded": stats["pipeline_cache_bytes_loaded"],
        "cache_file_rejected": stats["pipeline_cache_rejected"],
        "cache_bytes_saved": saved["pipeline_cache_bytes_saved"],
        "process_seconds": time.perf_counter() - t0,
    }


def _run_phase(phase: str, cache_dir: str, args) -> dict:
    env = dict(os.environ, GUESTCOMPUTE_CACHE_DIR=cache_dir,
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    if args.device:
        env["GUESTCOMPUTE_DEVICE"] = args.device
    if not args.keep_driver_caches:
        driver_cache = tempfile.mkdtemp(prefix="driver-cache-", dir=cache_dir)
        env.update(MESA_SHADER_CACHE_DISABLE="true", MESA_GLSL_CACHE_DISABLE="true",
                   __GL_SHADER_DISK_CACHE="0", __GL_SHADER_DISK_CACHE_PATH=driver_cache)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.pipeline_cache", "--child", phase,
                           "--threads", str(args.threads)],
                          cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{phase} process failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, help="warm-up threads (1: clean per-pipeline times)")
    p.add_argument("--repeat", type=int, default=3, help="cold/warm pairs, each with a fresh cache dir")
    p.add_argument("--device", help="device name substring or index (GUESTCOMPUTE_DEVICE)")
    p.add_argument("--keep-driver-caches", action="store_true",
                   help="leave the driver's own shader disk cache on")
    p.add_argument("--child", choices=["cold", "warm"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.threads)))
        return 0
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="gc-pipeline-bench-") as cache_dir:
            cold = _run_phase("cold", cache_dir, args)
            warm = _run_phase("warm", cache_dir, args)
        if cold["cache_file_loaded"] or not warm["cache_file_loaded"]:
            raise SystemExit(f"unexpected cache state: cold loaded={cold['cache_file_loaded']}, "
                             f"warm loaded={warm['cache_file_loaded']} ({warm['cache_file_rejected']})")
        runs.append({"cold": cold, "warm": warm,
                     "ratio": cold["driver_seconds"] / max(warm["driver_seconds"], 1e-9),
                     "wall_ratio": cold["warmup_seconds"] / max(warm["warmup_seconds"], 1e-9)})
    first = runs[0]["cold"]
    summary = {
        "benchmark": "pipeline_cache", "device": first["device"], "pipelines": first["pipelines_created"],
        "threads": args.threads, "repeat": args.repeat,
        "driver_caches": "kept" if args.keep_driver_caches else "disabled",
        "cold_ms_per_pipeline": statistics.median(r["cold"]["ms_per_pipeline"] for r in runs),
        "warm_ms_per_pipeline": statistics.median(r["warm"]["ms_per_pipeline"] for r in runs),
        "ratio": statistics.median(r["ratio"] for r in runs),
        "wall_ratio": statistics.median(r["wall_ratio"] for r in runs),
        "cache_file_bytes": first["cache_bytes_saved"],
        "spirv_compiles": first["spirv_compiles"],
        "runs": runs,
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
