"""The fused MLP (``rec.mlp``) against the same network run layer by layer.

Rows (a GPU's goals):

- "fused mlp 4x64 3840x2160 vs torch": a 32 -> 4x64 -> 16 ReLU network in
  fp16 over 3840 x 2160 queries (one per pixel of a 4K frame) from a
  float16 tensor, GPU ms, the kernel the selector picks. Baseline: torch's
  fp16 ``nn.Sequential`` of the same layers on CUDA, in a CUDA graph, in the
  same run, where torch has CUDA; otherwise the same network recorded layer
  by layer with guestcompute's own ``rec.matmul`` / ``rec.add`` /
  ``rec.relu`` (the row's baseline text says which). Goal: 5x faster.
- "fused mlp khr only vs torch": the same, forcing the VK_KHR_cooperative_matrix
  kernel; goal 3x faster; skipped, with the selector's reason, where it does
  not apply.
- "fused mlp bfloat16 4x64 3840x2160 vs torch" (no goal): the same network
  with bfloat16 weights and activations (float32 accumulators) against
  torch's bfloat16 ``nn.Sequential`` (or the float16 layer-by-layer
  recording), on a device of its own whose host asked gc.requirements()
  for VK_KHR_shader_bfloat16; skipped where the selector would not put it
  on the tensor cores.

On a CPU Vulkan device (lavapipe) both rows are skipped and one row runs
256 x 256 queries against the layer-by-layer recording instead.

Every result is checked against numpy (a slice) before its time counts.
Run alone: ``python -m benchmarks.neural_mlp [--quick] [--device NAME]``.
"""
from __future__ import annotations

import sys

import numpy as np

from .gpu_ops import Timer, run_on_device, torch_available, torch_seconds, warm_up
from .results import Result, standalone_main

SECTION = "neural"
WIDTHS = (32, 64, 64, 64, 64, 16)
QUERIES = 3840 * 2160
CPU_QUERIES = 256 * 256
# The goals: at least 5x torch's unfused route (and so about 0.9 ms), the KHR
# cooperative-matrix kernel alone at least 3x.
GOALS = {"fused mlp 4x64 3840x2160 vs torch": "ratio<=0.2", "fused mlp khr only vs torch": "ratio<=0.333"}
ROWS = tuple(GOALS)
FLOPS_PER_QUERY = 2 * sum(a * b for a, b in zip(WIDTHS, WIDTHS[1:]))


def accumulator(ctx) -> str:
    """float32, unless the device's cooperative-vector products give only
    fp16 results: then float16, so that the kernel NVIDIA made for such
    networks runs (the cooperative-vector reference accumulates in fp16 too)."""
    types = ctx.limits.coopvec_types
    if types and ("float16", "float16", "float16", "float32") not in types:
        return "float16"
    return "float32"


def network(ctx):
    import guestcompute as gc
    rng = np.random.default_rng(41)
    layers = [gc.Dense(rng.standard_normal((a, b)) / np.sqrt(a), rng.standard_normal(b) * 0.1,
                       "relu" if i + 2 < len(WIDTHS) else "none")
              for i, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:]))]
    return ctx.mlp(layers, dtype="float16", accumulate=accumulator(ctx)), layers


def check_against_numpy(got: np.ndarray, net, x: np.ndarray, what: str) -> None:
    """AssertionError unless 4,096 rows spread over the whole output (the
    first and last included: a dispatch that misses rows shows) match numpy."""
    rows = np.unique(np.linspace(0, len(x) - 1, 4096).astype(np.int64))
    ref = net.numpy(x[rows])
    err = np.abs(got[rows].astype(np.float32) - ref).max() / max(1.0, np.abs(ref).max())
    if not err <= 2e-2:
        raise AssertionError(f"{what}: error {err:.2e} against numpy")


def _layer_by_layer(ctx, layers, x):
    """The network as separate recorded ops: matmul, bias add, ReLU per layer."""
    ws = [ctx.tensor(layer.weight.astype(np.float16)) for layer in layers]
    bs = [ctx.tensor(layer.bias.astype(np.float16)) for layer in layers]
    hs = [ctx.empty((x.shape[0], layer.shape[1]), "float16") for layer in layers]

    def body(rec):
        h = x
        for layer, w, b, out in zip(layers, ws, bs, hs):
            rec.matmul(h, w, out=out)
            rec.add(out, b, out=out)
            if layer.activation == "relu":
                rec.relu(out, out=out)
            h = out
        return h
    return body


def _torch_baseline(layers, x_np: np.ndarray, reps: int, dtype: str = "float16") -> float:
    import torch
    mods = []
    for layer in layers:
        lin = torch.nn.Linear(*layer.shape)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(layer.weight.T.copy()))
            lin.bias.copy_(torch.from_numpy(layer.bias))
        mods += [lin] + ([torch.nn.ReLU()] if layer.activation == "relu" else [])
    model = torch.nn.Sequential(*mods).cuda().to(getattr(torch, dtype))
    tx = torch.from_numpy(x_np).cuda().to(getattr(torch, dtype))
    with torch.no_grad():
        return torch_seconds(lambda: model(tx), reps, graph=True)


def gpu_rows(ctx, quick: bool) -> list:
    import guestcompute as gc
    from guestcompute.ops.mlp_op import kernel_for
    reps = 3 if quick else 10
    timer = Timer(ctx, reps, rounds=3)
    net, layers = network(ctx)
    x_np = np.random.default_rng(42).standard_normal((QUERIES, WIDTHS[0])).astype(np.float16)
    x, out = ctx.tensor(x_np), ctx.empty((QUERIES, WIDTHS[-1]), "float16")
    if torch_available():
        baseline, base_s = "torch fp16 nn.Sequential in a CUDA graph, same GPU", _torch_baseline(layers, x_np, reps)
    else:
        body = _layer_by_layer(ctx, layers, x)
        check_against_numpy(ctx.run(body).numpy(), net, x_np.astype(np.float32), "layer by layer")
        baseline, base_s = "guestcompute layer by layer (rec.matmul, add, relu), same run", timer.gpu_seconds(body)
    warm_up(ctx, 1.0)
    rows = []
    for name, kernel in zip(ROWS, (None, "khr_coopmat")):
        try:
            ctx.run(lambda rec: rec.mlp(x, net, out=out, kernel=kernel))
        except gc.UnsupportedError as e:
            rows.append(Result(SECTION, name, goal=GOALS[name], skipped=str(e)))
            continue
        check_against_numpy(out.numpy(), net, x_np.astype(np.float32), name)
        mine = timer.gpu_seconds(lambda rec: rec.mlp(x, net, out=out, kernel=kernel))
        rows.append(Result(SECTION, name, mine * 1e3, "ms", baseline, base_s * 1e3, GOALS[name],
                           note=f"{kernel_for(ctx, net, kernel)}, {net.accumulate} accumulators, "
                                f"{QUERIES} queries, {QUERIES / mine / 1e9:.2f} G queries/s, "
                                f"{QUERIES * FLOPS_PER_QUERY / mine / 1e12:.0f} TFLOP/s"))
    rows.append(_bfloat16_row(ctx, layers, x_np, (baseline, base_s), quick))
    return rows


BF16_ROW = "fused mlp bfloat16 4x64 3840x2160 vs torch"


def _bfloat16_row(ctx, layers, x_np, fp16_baseline, quick: bool) -> Result:
    """The bfloat16 row, on a device of its own: a host that asked
    gc.requirements() for VK_KHR_shader_bfloat16 (testing.HeadlessHost,
    without validation), on the run's GPU."""
    from guestcompute.ops.mlp_op import kernel_for
    from guestcompute.testing import HeadlessHost
    host = HeadlessHost("modern", validation=False, device=ctx.limits.device_name, bfloat16=True)
    bctx = host.adopt()
    try:
        net = bctx.mlp(layers, dtype="bfloat16")
        kernel = kernel_for(bctx, net)
        if kernel == "fma":
            return Result(SECTION, BF16_ROW, skipped="bfloat16 runs on the portable kernel here: the device has "
                                                     "no bfloat16 cooperative matrices (VK_KHR_shader_bfloat16)")
        x, out = bctx.tensor(x_np), bctx.empty((QUERIES, WIDTHS[-1]), "float16")
        bctx.run(lambda rec: rec.mlp(x, net, out=out))
        check_against_numpy(out.numpy(), net, x_np.astype(np.float32), BF16_ROW)
        reps = 3 if quick else 10
        warm_up(bctx, 1.0)
        mine = Timer(bctx, reps, rounds=3).gpu_seconds(lambda rec: rec.mlp(x, net, out=out))
    finally:
        bctx.close()
        host.close()
    baseline = fp16_baseline
    if torch_available():
        baseline = ("torch bfloat16 nn.Sequential in a CUDA graph, same GPU",
                    _torch_baseline(layers, x_np.astype(np.float32), reps, "bfloat16"))
    return Result(SECTION, BF16_ROW, mine * 1e3, "ms", baseline[0], baseline[1] * 1e3,
                  note=f"{kernel}, float32 accumulators, float16 tensors in and out, "
                       f"{QUERIES * FLOPS_PER_QUERY / mine / 1e12:.0f} TFLOP/s")


def cpu_rows(ctx, quick: bool) -> list:
    out = [Result(SECTION, name, goal=GOALS[name], skipped="a GPU's goal: this device runs on the CPU")
           for name in ROWS]
    out.append(Result(SECTION, BF16_ROW, skipped="a GPU's row: this device runs on the CPU"))
    timer = Timer(ctx, reps=1 if quick else 2, rounds=1 if quick else 3)
    net, layers = network(ctx)
    x_np = np.random.default_rng(42).standard_normal((CPU_QUERIES, WIDTHS[0])).astype(np.float16)
    x = ctx.tensor(x_np)
    check_against_numpy(ctx.run(lambda rec: rec.mlp(x, net)).numpy(), net, x_np.astype(np.float32), "fused")
    body = _layer_by_layer(ctx, layers, x)
    mine, base = timer.gpu_seconds(lambda rec: rec.mlp(x, net)), timer.gpu_seconds(body)
    out.append(Result(SECTION, "fused mlp 4x64 256x256 vs layer by layer", mine * 1e3, "ms",
                      "guestcompute layer by layer (rec.matmul, add, relu), same run", base * 1e3,
                      note="lavapipe runs on the CPU: lower ratio is better"))
    return out


def run(env) -> list:
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
