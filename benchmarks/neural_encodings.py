"""Neural input encodings against the memory traffic they cannot avoid, in
one run.

- "hash grid 1920x1080": ``rec.hash_grid_encode`` of one 2-D point per
  pixel of a 1920 x 1080 frame through Instant-NGP's default grid (16
  levels of 2 features, 2^19-entry float16 tables, float16 out), GPU µs,
  against the compute-shader copy of a buffer of the output's size
  (``rec.copy``: the output's bytes read and written once) — the encoding
  writes those bytes and gathers 4 table entries per level besides;
- "frequency encoding 1920x1080": ``rec.frequency_encoding`` of one 3-D
  point per pixel, 10 frequencies and the input (63 float16 values per
  point), against the same kind of copy of its output's size;
- "hash grid + mlp 1920x1080": that hash grid feeding the fused MLP
  32 -> 4 x 64 -> 16 (ReLU, fp16; ``rec.mlp``), two dispatches, GPU ms;
  goal: at most 1 ms. Its baseline is the hash grid alone, same run.

Each result is checked against the numpy reference (a slice of the points)
before its time counts. On a CPU Vulkan device (lavapipe) a 320 x 180
frame is timed, without goals.

Run alone: ``python -m benchmarks.neural_encodings [--quick] [--device NAME]``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .gpu_ops import Timer, compute_copy_seconds, run_on_device, warm_up
from .results import Result, standalone_main

SECTION = "neural"
HASH_ROW = "hash grid 1920x1080"
FREQ_ROW = "frequency encoding 1920x1080"
GRID_MLP_ROW = "hash grid + mlp 1920x1080"
GOALS = {HASH_ROW: "ratio<=4", FREQ_ROW: "ratio<=2", GRID_MLP_ROW: "value<=1.0"}
MLP_WIDTHS = (32, 64, 64, 64, 64, 16)
BASELINE = "compute-shader copy of an output-sized buffer (rec.copy), same run"


def _refs():
    """The numpy references the tests use (tests/encoding_refs.py)."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import encoding_refs
    return encoding_refs


def _check(got: np.ndarray, ref: np.ndarray, atol: float, what: str) -> None:
    err = np.abs(got.astype(np.float64) - ref).max()
    if not err <= atol:
        raise AssertionError(f"{what}: max error {err:.3g} > {atol:.3g} against numpy")


def encoding_rows(ctx, w: int, h: int, timer: Timer, goals: bool) -> list:
    refs = _refs()
    rng = np.random.default_rng(41)
    n = w * h
    grid = ctx.hash_grid(n_input_dims=2, n_levels=16, n_features_per_level=2, log2_hashmap_size=19,
                         base_resolution=16, per_level_scale=2.0, dtype="float16")
    grid.set_params(rng.uniform(-1, 1, grid.n_params))
    ys, xs = np.divmod(np.arange(n), w)
    uv_np = np.stack([(xs + 0.5) / w, (ys + 0.5) / h], axis=-1).astype(np.float32)
    uv = ctx.tensor(uv_np)
    encoded = ctx.empty((n, grid.output_dims), "float16")
    points_np = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    points = ctx.tensor(points_np)
    freq = ctx.empty((n, 3 * 21), "float16")
    ctx.run(lambda rec: (rec.hash_grid_encode(uv, grid, out=encoded), rec.frequency_encoding(points, 10, out=freq)))
    sample = slice(0, n, max(1, n // 4096))
    table = grid.params.numpy()
    ref = refs.ref_hash_grid(uv_np[sample], grid, table)
    _check(encoded.numpy()[sample], ref, 2.0 ** -10 * max(1.0, np.abs(ref).max()), HASH_ROW)
    _check(freq.numpy()[sample], refs.ref_frequency(points_np[sample], 10), 2.0 ** -10, FREQ_ROW)

    hash_s = timer.gpu_seconds(lambda rec: rec.hash_grid_encode(uv, grid, out=encoded))
    hash_copy_s = compute_copy_seconds(ctx, timer, encoded.nbytes // 4)
    freq_s = timer.gpu_seconds(lambda rec: rec.frequency_encoding(points, 10, out=freq))
    freq_copy_s = compute_copy_seconds(ctx, timer, freq.nbytes // 4)
    size = f"{w}x{h}"
    grid_mlp = _grid_mlp_row(ctx, timer, uv, grid, encoded, hash_s, size, goals)
    return [Result(SECTION, HASH_ROW.replace("1920x1080", size), hash_s * 1e6, "µs", BASELINE, hash_copy_s * 1e6,
                   GOALS[HASH_ROW] if goals else "",
                   note="16 levels x 2 features, 2^19 float16 entries per level, 2-D points, float16 out"),
            Result(SECTION, FREQ_ROW.replace("1920x1080", size), freq_s * 1e6, "µs", BASELINE, freq_copy_s * 1e6,
                   GOALS[FREQ_ROW] if goals else "", note="3-D points, 10 frequencies and the input, float16 out"),
            grid_mlp]


def _grid_mlp_row(ctx, timer, uv, grid, encoded, hash_s: float, size: str, goals: bool) -> Result:
    """The hash grid's 32 features through a 4 x 64 ReLU network to 16 outputs."""
    import guestcompute as gc

    from .neural_mlp import accumulator
    rng = np.random.default_rng(43)
    pairs = list(zip(MLP_WIDTHS, MLP_WIDTHS[1:]))
    net = ctx.mlp([gc.Dense(rng.standard_normal((a, b)) / np.sqrt(a), rng.standard_normal(b) * 0.1,
                            "relu" if k + 1 < len(pairs) else "none") for k, (a, b) in enumerate(pairs)],
                  accumulate=accumulator(ctx))
    out = ctx.empty((encoded.shape[0], MLP_WIDTHS[-1]), "float16")

    def body(rec):
        rec.hash_grid_encode(uv, grid, out=encoded)
        rec.mlp(encoded, net, out=out)
    ctx.run(body)
    sample = slice(0, encoded.shape[0], max(1, encoded.shape[0] // 4096))
    ref = net.numpy(encoded.numpy()[sample].astype(np.float32))
    _check(out.numpy()[sample], ref, 2e-2 * max(1.0, np.abs(ref).max()), GRID_MLP_ROW)
    mine = timer.gpu_seconds(body)
    kernel = gc.ops.mlp_op.kernel_for(ctx, net)
    return Result(SECTION, GRID_MLP_ROW.replace("1920x1080", size), mine * 1e3, "ms",
                  "the hash grid alone, same run", hash_s * 1e3, GOALS[GRID_MLP_ROW] if goals else "",
                  note=f"hash grid (16 x 2, 2^19 fp16) then rec.mlp 32 -> 4x64 -> 16 ReLU fp16 ({kernel} kernel, "
                       f"{net.accumulate} accumulators)")


def gpu_rows(ctx, quick: bool) -> list:
    if not ctx.caps.float16_storage:
        return [Result(SECTION, name, goal=GOALS[name], skipped="needs 16-bit storage") for name in GOALS]
    warm_up(ctx, 1.0)
    return encoding_rows(ctx, 1920, 1080, Timer(ctx, 5 if quick else 20, rounds=3), goals=True)


def cpu_rows(ctx, quick: bool) -> list:
    """lavapipe: a small frame, no goals (its goals are a GPU's)."""
    if not ctx.caps.float16_storage:
        return [Result(SECTION, name, skipped="needs 16-bit storage") for name in GOALS]
    return encoding_rows(ctx, 320, 180, Timer(ctx, 2, rounds=1 if quick else 3), goals=False)


def run(env) -> list:
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
