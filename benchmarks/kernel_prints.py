"""What ``debugPrintfEXT`` in a user kernel costs, on the GPU, in one run.

A bandwidth-bound kernel (``y = x * a + b`` over 2^23 floats) is timed in
three builds of the same source, each with GPU timestamps:

- without any print call: the baseline;
- with its print calls compiled out (``ctx.kernel(..., prints=False)``):
  row "printf compiled out vs no prints", goal ratio <= 1.1 — its SPIR-V is
  byte for byte the kernel's without print calls, so it is the same
  pipeline (tests/ops/test_kernel_prints.py checks that) and the ratio is
  the run's noise;
- with its prints on, where the condition guarding them is false for every
  invocation (no print is made): row "printf on, no print made vs no
  prints", no goal — what the log binding and the untaken branch cost.

Run alone: ``python -m benchmarks.kernel_prints [--quick] [--device NAME]``.
"""
from __future__ import annotations

import shutil
import sys

import numpy as np

from .gpu_ops import Timer, warm_up
from .results import Result, skipped, standalone_main

SECTION = "prints"
N = 1 << 23
SOURCE = """#version 450
#extension GL_EXT_debug_printf : enable
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float a; float b; uint watch; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    float v = x[i] * pc.a + pc.b;
    y[i] = v;
    if (i == pc.watch) {
        PRINT
    }
}
"""


def measure(ctx, reps: int) -> dict:
    plain = ctx.kernel(SOURCE.replace("#extension GL_EXT_debug_printf : enable\n", "").replace("PRINT", ""))
    printing = SOURCE.replace("PRINT", 'debugPrintfEXT("y[%u] = %f", i, v);')
    quiet = ctx.kernel(printing, prints=False)
    loud = ctx.kernel(printing, on_print=lambda name, text: None)
    x, y = ctx.empty((N,)), ctx.empty((N,))
    ctx.run(lambda rec: rec.fill(x, 0.5))
    push = np.array([(N, 2.0, 1.0, 0xFFFFFFFF)], dtype=[("n", "<u4"), ("a", "<f4"), ("b", "<f4"), ("w", "<u4")])[0]
    timer = Timer(ctx, reps, 5)
    warm_up(ctx, 0.5)
    found = {}
    for name, k in (("plain", plain), ("quiet", quiet), ("loud", loud)):
        found[name] = timer.gpu_seconds(lambda rec, k=k: k(rec, x, y, push=push, groups=N // 256))
    found["made"] = ctx.print_logs.made
    return found


def run(env) -> list:
    if shutil.which("glslc") is None:
        return [skipped(SECTION, "printf compiled out vs no prints", "needs glslc")]
    from guestcompute.context import Context
    ctx = Context.create(env.device)
    try:
        found = measure(ctx, 5 if env.quick else 20)
    finally:
        ctx.close()
    us = {k: v * 1e6 for k, v in found.items() if k != "made"}
    return [Result(SECTION, "printf compiled out vs no prints", us["quiet"], "µs", "the kernel without print calls",
                   us["plain"], "ratio<=1.1", note="y = x * a + b over 2^23 floats; the same SPIR-V and "
                   "pipeline, so the ratio is the run's noise"),
            Result(SECTION, "printf on, no print made vs no prints", us["loud"], "µs",
                   "the kernel without print calls", us["plain"],
                   note=f"the print log bound, its branch never taken; {found['made']} log buffer(s) made")]


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
