"""A reference for the fused MLP's VK_KHR_cooperative_matrix kernel: a
minimal KHR cooperative-matrix MLP of the library's own
(``baselines/coopmat_mlp.comp``), timed beside ``rec.mlp(...,
kernel="khr_coopmat")`` in the same run. It shows what a kernel on that
extension reaches on this device and driver. Then the "fused mlp khr only"
row's miss is either explained by a measured reference, or shown to be the
library kernel's own.

Row (no goal): "fused mlp khr only vs own cooperative-matrix reference".
It gives ``rec.mlp``'s khr_coopmat kernel against the fastest reference
variant, in GPU ms. The run is the benchmark network of
``neural_mlp`` (32 -> 4x64 -> 16, ReLU, fp16) over 3840 x 2160 queries,
with the network's accumulators (``neural_mlp.accumulator``). Each variant
is checked against numpy before its time counts, and the note lists every
variant's rate.

The reference fixes everything at compile time: the widths, the weight
offsets, ReLU, and whole tiles of queries with no bounds checks. Its
variants (:data:`VARIANTS`) differ in subgroups per workgroup, 16-row
fragments per subgroup, whether the weights are staged in shared memory or
loaded from the buffer, and whether the activation's element loop is
unrolled; four more take the first one step by step towards ``rec.mlp``'s
kernel (the source's STEP: the offsets, the depth, the widths and the
activation read from a table in the bias buffer at run time). Each comes
with fp16 and fp32 accumulators. What no step covers is how ``rec.mlp``
reads its queries and writes its results: fp16 rows of whole fragments a
fragment at a time (the benchmark's case, as here), but through shared
memory into its activation rows, where the reference multiplies the first
layer's inputs straight from the buffer; any other rows element by element,
bounds-checked, and their results through an fp32 tile.
The SPIR-V is compiled by glslangValidator 13 or later (Debian 12's glslc
predates GL_KHR_cooperative_matrix; ``pip install 'guestcompute[bake]'``
brings one) and committed; ``--build`` rebuilds it. It is loaded with
``ctx.kernel(..., validate=False)``, because Debian 12's spirv-val predates
the extension.

The row is skipped, saying why, on a CPU device and wherever ``rec.mlp``'s
own KHR kernel does not apply. A variant that cannot run there (its shared
memory, its grid) is listed as failed in the note.

Run alone: ``python -m benchmarks.neural_coopmat [--quick] [--device NAME]``.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from .results import Result, standalone_main

SECTION = "neural"
ROW = "fused mlp khr only vs own cooperative-matrix reference"
BASELINES = Path(__file__).resolve().parent / "baselines"
SOURCE = BASELINES / "coopmat_mlp.comp"
WIDTHS = (32, 64, 64, 64, 64, 16)          # what the source is written for
# (subgroups per workgroup, 16-row fragments per subgroup, weights in shared
# memory, the activation's loop over fragment elements marked [[unroll]],
# the source's STEP). The fifth differs from the first only in that loop;
# the sixth takes eight fragments a subgroup (the most whose rows fit the
# 48 KiB of shared memory some drivers give, with two subgroups); the last
# four are the first at STEP 1 to 4 (rec.mlp's tiling is the
# first's: four subgroups of two fragments).
VARIANTS = ((4, 2, False, True, 0), (4, 4, False, True, 0), (4, 2, True, True, 0), (2, 4, True, True, 0),
            (4, 2, False, False, 0), (2, 8, False, True, 0)) + tuple((4, 2, False, True, step) for step in (1, 2, 3, 4))
TABLE_UVEC4S = 2 * (len(WIDTHS) - 1) + 1   # per layer two, then the depth
TABLE_DEPTH_AT = TABLE_UVEC4S - 1
ACCUMULATORS = ("float16", "float32")
SUBGROUP = 32
TARGET_ENV = "vulkan1.1"                   # as the library's own KHR kernels


def offsets(widths=WIDTHS) -> tuple:
    """([matrix offsets], [bias offsets]) in uvec4s (eight fp16): each
    layer's K x N matrix, and its 16 x N bias block after the table, back
    to back."""
    w_at, b_at, w, b = [], [], 0, TABLE_UVEC4S
    for k, n in zip(widths, widths[1:]):
        w_at.append(w)
        b_at.append(b)
        w += k * n // 8
        b += 16 * n // 8
    return w_at, b_at


def pack(layers) -> tuple:
    """(matrix words, bias words) as uint32 arrays in the layout of
    :func:`offsets`: matrices row-major (K x N, as ``Dense.weight``); the
    table (per layer matrix offset, bias offset, K, N; activation code as
    rec.mlp's, slope bits; then the depth), then each bias written as 16
    equal rows."""
    from guestcompute.ops.mlp_kernels import ACTIVATIONS
    mats = [np.ascontiguousarray(layer.weight, np.float16).ravel() for layer in layers]
    table = np.zeros((TABLE_UVEC4S, 4), np.uint32)
    for i, (layer, w_at, b_at) in enumerate(zip(layers, *offsets())):
        table[2 * i] = (w_at, b_at, layer.shape[0], layer.shape[1])
        table[2 * i + 1, :2] = (ACTIVATIONS.index(layer.activation), np.float32(layer.slope).view(np.uint32))
    table[TABLE_DEPTH_AT, 0] = len(layers)
    biases = [np.tile(np.asarray(layer.bias, np.float16), 16).view(np.uint32) for layer in layers]
    return np.concatenate(mats).view(np.uint32).copy(), np.concatenate([table.ravel()] + biases)


def variant_name(variant, acc: str) -> str:
    subgroups, row_frags, shared, unrolled, step = variant
    return (f"sg{subgroups}_rf{row_frags}_{'shared' if shared else 'buffer'}"
            f"{'' if unrolled else '_rolled'}{f'_step{step}' if step else ''}_{acc}")


def rows_per_group(variant) -> int:
    subgroups, row_frags = variant[:2]
    return subgroups * row_frags * 16


def spirv_path(variant, acc: str, folder: Path = BASELINES) -> Path:
    return folder / f"coopmat_mlp_{variant_name(variant, acc)}.spv"


def defines(variant, acc: str) -> dict:
    subgroups, row_frags, shared, unrolled, step = variant
    w_at, b_at = offsets()
    out = {"THREADS": subgroups * SUBGROUP, "SUBGROUPS": subgroups, "ROW_FRAGS": row_frags,
           "WEIGHTS_SHARED": int(shared), "ACC_F32": int(acc == "float32"), "UNROLL_ELEMENTS": int(unrolled),
           "STEP": step, "TABLE_DEPTH": TABLE_DEPTH_AT}
    out.update({f"W{i}": v for i, v in enumerate(w_at)})
    out.update({f"B{i}": v for i, v in enumerate(b_at)})
    return out


def build(folder: Path = BASELINES) -> None:
    """Compile every variant with glslangValidator into ``folder`` (by
    default the committed files)."""
    from guestcompute.spirv.compiler import glslang_path
    exe = glslang_path()
    for variant in VARIANTS:
        for acc in ACCUMULATORS:
            flags = [f"-D{k}={v}" for k, v in defines(variant, acc).items()]
            subprocess.run([exe, "-V", "--target-env", TARGET_ENV, *flags, "-S", "comp", str(SOURCE),
                            "-o", str(spirv_path(variant, acc, folder))], check=True, capture_output=True)


def reference_seconds(ctx, variant, acc: str, operands: tuple, timer) -> float:
    """GPU seconds of one reference dispatch over ``operands`` (queries,
    matrices, biases, outputs: uint32 tensors of fp16 pairs); the outputs
    are filled with NaNs first."""
    from .gpu_ops import fill_with_nans
    queries = operands[0].shape[0] // (WIDTHS[0] // 2)
    per_group = rows_per_group(variant)
    if queries % per_group:
        raise ValueError(f"{queries} queries are not whole tiles of {per_group}")
    groups = queries // per_group
    if groups > ctx.limits.max_workgroup_count[0]:
        raise ValueError(f"{groups} workgroups exceed the device's {ctx.limits.max_workgroup_count[0]}")
    kernel = ctx.kernel(spirv_path(variant, acc).read_bytes(), name=f"coopmat_mlp_{variant_name(variant, acc)}",
                        validate=False)

    def body(rec):
        rec.run_kernel(kernel, list(operands), groups=(groups, 1, 1))
    fill_with_nans(ctx, operands[3])
    ctx.run(body)
    return timer.gpu_seconds(body)


def gpu_rows(ctx, quick: bool) -> list:
    import guestcompute as gc
    from guestcompute.ops.mlp_op import kernel_for

    from . import neural_mlp as mlp
    from .gpu_ops import Timer, reference_rates, warm_up
    assert mlp.WIDTHS == WIDTHS, "baselines/coopmat_mlp.comp is written for the benchmark network"
    net, layers = mlp.network(ctx)
    try:
        kernel_for(ctx, net, "khr_coopmat")
    except gc.UnsupportedError as e:
        return [Result(SECTION, ROW, skipped=f"rec.mlp's KHR kernel does not apply here: {e}")]
    timer = Timer(ctx, 3 if quick else 10, rounds=3)
    x_np = np.random.default_rng(42).standard_normal((mlp.QUERIES, WIDTHS[0])).astype(np.float16)
    x, out = ctx.tensor(x_np), ctx.empty((mlp.QUERIES, WIDTHS[-1]), "float16")

    def ours(rec):
        rec.mlp(x, net, out=out, kernel="khr_coopmat")
    ctx.run(ours)
    mlp.check_against_numpy(out.numpy(), net, x_np, "rec.mlp khr_coopmat")
    warm_up(ctx, 1.0)
    mine = timer.gpu_seconds(ours)
    words, biases = pack(layers)
    operands = (ctx.tensor(x_np.view(np.uint32).reshape(-1)), ctx.tensor(words), ctx.tensor(biases),
                ctx.empty((mlp.QUERIES * WIDTHS[-1] // 2,), "uint32"))
    flops = mlp.QUERIES * mlp.FLOPS_PER_QUERY
    times, failures = {}, []
    for variant in VARIANTS:
        name = variant_name(variant, net.accumulate)
        try:
            s = reference_seconds(ctx, variant, net.accumulate, operands, timer)
            got = operands[3].numpy().view(np.float16).reshape(mlp.QUERIES, WIDTHS[-1])
            mlp.check_against_numpy(got, net, x_np, f"cooperative-matrix reference {name}")
        except (gc.GuestComputeError, ValueError, AssertionError) as e:
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
            continue
        times[name] = s
    if not times:
        return [Result(SECTION, ROW, skipped="no reference variant ran: " + "; ".join(failures))]
    best = min(times, key=times.get)
    note = (f"rec.mlp khr_coopmat {flops / mine / 1e12:.0f} TFLOP/s, {net.accumulate} accumulators; reference "
            + reference_rates(flops, times, failures))
    return [Result(SECTION, ROW, mine * 1e3, "ms",
                   f"own minimal VK_KHR_cooperative_matrix MLP ({best}), same GPU", times[best] * 1e3, note=note)]


def cpu_rows(ctx, quick: bool) -> list:
    return [Result(SECTION, ROW, skipped="a GPU's reference: this device runs on the CPU")]


def run(env) -> list:
    from .gpu_ops import run_on_device
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run], build=build))
