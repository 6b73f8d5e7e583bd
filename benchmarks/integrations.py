"""Benchmarks that live in their own scripts (each runnable alone, printing
JSON), turned into report rows. A script not in this checkout yet is listed
as skipped, so the suite runs at every stage of the project."""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from .results import Result, skipped

REPO = Path(__file__).resolve().parent.parent


def _present(module: str) -> bool:
    return importlib.util.find_spec(f"benchmarks.{module}") is not None


def run_script(module: str, args: list, env) -> dict:
    """``python -m benchmarks.<module> args...`` in a child process; its
    stdout is one JSON document."""
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    if env.device:
        child_env["GUESTCOMPUTE_DEVICE"] = str(env.device)
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], cwd=REPO, env=child_env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmarks.{module} failed:\n{proc.stderr[-2000:]}")
    out = proc.stdout.strip()
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return json.loads(out.splitlines()[-1])


def _own_rows(module: str, env):
    """Rows from a module that speaks the suite's protocol (``run(env)``)."""
    mod = importlib.import_module(f"benchmarks.{module}")
    if hasattr(mod, "run"):
        rows = mod.run(env)
        if rows and all(isinstance(r, Result) for r in rows):
            return rows
    return None


# -- persisted pipeline cache (cold vs warm process) -------------------------------------

def pipeline_cache(env) -> list:
    name = "pipeline creation, whole built-in set: warm persisted cache vs cold (separate processes)"
    if not _present("pipeline_cache"):
        return [skipped("pipeline cache", name, "benchmarks/pipeline_cache.py not in this checkout yet")]
    args = ["--repeat", "1" if env.quick else "2"]
    if env.device is not None:
        args += ["--device", str(env.device)]
    s = run_script("pipeline_cache", args, env)
    cold, warm = s["cold_ms_per_pipeline"], s["warm_ms_per_pipeline"]
    # The goal (cold/warm >= 20x) is about GPU drivers, which compile at pipeline creation;
    # lavapipe compiles at the first dispatch, so its creation is cheap either way.
    goal = "" if "llvmpipe" in s["device"] else "ratio<=0.05"
    return [Result("pipeline cache", name, warm, "ms/pipeline", "cold: no cache file (separate process)", cold,
                   goal,
                   note=f"{s['pipelines']} pipelines; cold/warm {s['ratio']:.1f}× inside "
                        f"vkCreateComputePipelines, {s['wall_ratio']:.1f}× for the whole warm-up; "
                        f"driver disk caches {s['driver_caches']}; median of {s['repeat']}",
                   extra={"summary": {k: v for k, v in s.items() if k != "runs"}})]


# -- program replay vs re-recording --------------------------------------------------------

def program_replay(env) -> list:
    name = "replay a 1000-dispatch program"
    if not _present("program_replay"):
        return [skipped("programs", name, "benchmarks/program_replay.py not in this checkout yet")]
    rows = _own_rows("program_replay", env)
    if rows is not None:
        return rows
    s = run_script("program_replay", ["--quick"] if env.quick else [], env)
    return rows_from_summary("programs", s)


# -- injected work vs semaphore hand-off ----------------------------------------------------

def handoff(env) -> list:
    name = "frame with guest work injected vs semaphore hand-off"
    if not _present("handoff"):
        return [skipped("hand-off", name, "benchmarks/handoff.py not in this checkout yet")]
    rows = _own_rows("handoff", env)
    if rows is not None:
        mod = importlib.import_module("benchmarks.handoff")
        if hasattr(mod, "run_async"):        # the async-compute queue family variant
            rows += mod.run_async(env)
        return rows
    s = run_script("handoff", ["--quick"] if env.quick else [], env)
    return rows_from_summary("hand-off", s)


def rows_from_summary(section: str, s: dict) -> list:
    """A script's JSON summary as rows: every ``rows`` entry it gives
    ({name, value, unit, baseline, baseline_value, goal, note}) or else
    every number it reports, one row each."""
    if isinstance(s.get("rows"), list):
        return [Result(section, r["name"], r.get("value"), r.get("unit", ""), r.get("baseline", ""),
                       r.get("baseline_value"), r.get("goal", ""), note=r.get("note", "")) for r in s["rows"]]
    return [Result(section, k, v, note="as reported by the script") for k, v in s.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)]
