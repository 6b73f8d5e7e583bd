"""FFTs against torch.fft (cuFFT) on the same GPU, in the same run.

Rows (the goals of the FFT work, judged on a GPU with torch):

- "fft2 c2c 1024x1024x32 vs cuFFT", "rfft2 1024x1024x32 vs cuFFT",
  "irfft2 1024x1024x32 vs cuFFT": ``rec.fft2`` / ``rfft2`` / ``irfft2`` of
  32 complex64 (float32) 1024 x 1024 planes, speed against
  ``torch.fft.fft2`` / ``rfft2`` / ``irfft2``, >= 90 %. Both are given as
  VkFFT's metric: twice the bytes of the larger side, over the time;
- "fft c2c 1-D <n> batched vs copy" for n = 256, 1024, 4096: ``rec.fft`` of
  256 MiB of complex64 rows, against the compute-shader copy of the same
  bytes (``rec.copy``), >= 90 %;
- "fft 512x512 single": one ``rec.fft2`` of a 512 x 512 complex64 plane,
  GPU µs, <= 9 (cuFFT in a CUDA graph beside it);
- "ocean cascade 6x512 c2r": ``rec.irfft2`` of six 512 x 257 spectra, GPU
  µs, <= 20 (cuFFT in a CUDA graph beside it);
- "fft bloom 1024x2048": an RGB 1024 x 2048 image convolved through
  ``rec.fft_convolve`` with a kernel spectrum made once (rfft2 of the rows,
  the columns' transform, product and inverse fused in one pass, irfft2 of
  the rows), GPU µs, <= 120 (torch's rfft2, product, irfft2 in a CUDA graph
  beside it).

Where VkFFT's headers are at hand (``GUESTCOMPUTE_VKFFT_INCLUDE``, see
:mod:`benchmarks.vkfft_baseline`), VkFFT times the same transforms in the
same run, through Vulkan on the same device and through CUDA: the rows
"<transform> vs VkFFT (Vulkan)" and "... (CUDA)" (no goal) put our time
beside VkFFT's, and their note says how fast VkFFT was against the goal
row's baseline. They are the measured reference for a goal row missed.

Every result is checked against numpy (a slice of the large ones) before
its time counts. torch is timed with CUDA events: eagerly for the large
transforms, inside a CUDA graph of 20 calls for the small ones (eager calls
of those are launch-bound). Ours are the median of three command buffers,
each timing 10 calls between two timestamps, or 20 for the small ones: as
many as the CUDA graph and VkFFT's command buffer hold, so that the
timestamps' fixed cost is spread alike. On a CPU Vulkan device (lavapipe) small
transforms are timed against numpy instead (no goal).

Run alone: ``python -m benchmarks.fft [--quick] [--device NAME]``.
"""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .gpu_ops import GRAPH_CALLS, Timer, compute_copy_seconds, numpy_seconds, run_on_device, torch_available, torch_seconds, warm_up
from . import vkfft_baseline
from .results import Result, standalone_main

SECTION = "fft"
BIG = (32, 1024, 1024)
BATCHED = 32 << 20                  # complex64 values of the batched 1-D rows: 256 MiB
GOALS = {"fft2 c2c 1024x1024x32 vs cuFFT": "ratio>=0.9", "rfft2 1024x1024x32 vs cuFFT": "ratio>=0.9",
         "irfft2 1024x1024x32 vs cuFFT": "ratio>=0.9", "fft c2c 1-D 256 batched vs copy": "ratio>=0.9",
         "fft c2c 1-D 1024 batched vs copy": "ratio>=0.9", "fft c2c 1-D 4096 batched vs copy": "ratio>=0.9",
         "fft 512x512 single": "value<=9", "ocean cascade 6x512 c2r": "value<=20",
         "fft bloom 1024x2048": "value<=120"}
ROWS = tuple(GOALS)
VKFFT_BACKENDS = ("vulkan", "cuda")
VKFFT_CASES = {"fft2 c2c 1024x1024x32 vs cuFFT": "c2c_2d_1024x1024x32", "rfft2 1024x1024x32 vs cuFFT": "r2c_2d_1024x1024x32",
               "irfft2 1024x1024x32 vs cuFFT": "c2r_2d_1024x1024x32", "fft c2c 1-D 256 batched vs copy": "c2c_1d_256",
               "fft c2c 1-D 1024 batched vs copy": "c2c_1d_1024", "fft c2c 1-D 4096 batched vs copy": "c2c_1d_4096",
               "fft 512x512 single": "c2c_2d_512_single", "ocean cascade 6x512 c2r": "c2r_2d_512x6"}


def check_close(got: np.ndarray, ref: np.ndarray, what: str) -> float:
    """The relative RMS error of ``got`` (the RMS of ``got - ref`` over the
    RMS of ``ref``); AssertionError above 1e-5."""
    err = float(np.sqrt(np.mean(np.abs(got - ref) ** 2)) / np.sqrt(np.mean(np.abs(ref) ** 2)))
    if not err <= 1e-5:
        raise AssertionError(f"{what}: relative RMS error {err:.2e} against numpy")
    return err


def times(mine: float, base: float) -> dict:
    """A goal row's two times in µs, for the VkFFT rows beside it."""
    return {"ours_us": mine * 1e6, "baseline_us": base * 1e6}


def vkfft_rows(goal_rows: list, backend: str, reference, why: str) -> list:
    """For each goal row VkFFT's ``backend`` also ran: our time against
    VkFFT's. Without a reference, one skipped row says why."""
    suffix = f" vs VkFFT ({'CUDA' if backend == 'cuda' else 'Vulkan'})"
    if reference is None:
        return [Result(SECTION, "fft" + suffix, skipped=why)]
    rows = []
    for row in goal_rows:
        case = VKFFT_CASES.get(row.name)
        if case is None or row.skipped or "ours_us" not in row.extra:
            continue
        theirs, base = reference.us[case], row.extra["baseline_us"]
        against = "copy" if "vs copy" in row.name else "cuFFT"
        name = row.name.removesuffix(" vs cuFFT").removesuffix(" vs copy") + suffix
        rows.append(Result(SECTION, name, row.extra["ours_us"], "µs", f"{reference.label}, same GPU", theirs,
                           note=f"time ratio, lower is better; VkFFT at {base / theirs:.2f}x the speed of {against} "
                                f"({base:.1f} µs) in this run"))
    return rows


def _ours(timer: Timer, ctx, body) -> float:
    warm_up(ctx, 0.4)
    return timer.gpu_seconds(body)


def _big_rows(ctx, timer: Timer, reps: int) -> list:
    import torch
    rng = np.random.default_rng(28)
    b, h, w = BIG
    x_np = (rng.standard_normal((b, h, w)) + 1j * rng.standard_normal((b, h, w))).astype(np.complex64)
    r_np = x_np.real.copy()
    x, r = ctx.tensor(x_np), ctx.tensor(r_np)
    spec = ctx.empty((b, h, w // 2 + 1), "complex64")
    out_c, out_r = ctx.empty((b, h, w), "complex64"), ctx.empty((b, h, w), "float32")
    ctx.run(lambda rec: (rec.fft2(x, out=out_c), rec.rfft2(r, out=spec), rec.irfft2(spec, out=out_r)))
    check_close(out_c.numpy()[0], np.fft.fft2(x_np[0].astype(np.complex128)), "fft2")
    check_close(spec.numpy()[0], np.fft.rfft2(r_np[0].astype(np.float64)), "rfft2")
    check_close(out_r.numpy()[0], r_np[0], "irfft2 of rfft2")
    tx, tr = torch.from_numpy(x_np).cuda(), torch.from_numpy(r_np).cuda()
    tspec = torch.fft.rfft2(tr)
    cases = (("fft2 c2c 1024x1024x32 vs cuFFT", lambda rec: rec.fft2(x, out=out_c), lambda: torch.fft.fft2(tx), 8),
             ("rfft2 1024x1024x32 vs cuFFT", lambda rec: rec.rfft2(r, out=spec), lambda: torch.fft.rfft2(tr), 8),
             ("irfft2 1024x1024x32 vs cuFFT", lambda rec: rec.irfft2(spec, out=out_r),
              lambda: torch.fft.irfft2(tspec), 8))
    rows = []
    for name, ours, theirs, itemsize in cases:
        nbytes = 2 * b * h * w * itemsize          # VkFFT's metric: twice the complex system
        mine = _ours(timer, ctx, ours)
        base = torch_seconds(theirs, reps, graph=False)
        rows.append(Result(SECTION, name, nbytes / mine / 1e9, "GB/s", "torch.fft (cuFFT), same GPU",
                           nbytes / base / 1e9, GOALS[name], note=f"ours {mine * 1e6:.0f} µs, cuFFT {base * 1e6:.0f} µs",
                           extra=times(mine, base)))
    return rows


def _batched_rows(ctx, timer: Timer) -> list:
    total = BATCHED
    rng = np.random.default_rng(29)
    x, out = ctx.empty((total,), "complex64"), ctx.empty((total,), "complex64")
    ctx.run(lambda rec: (rec.fill(x.real, 0.5), rec.fill(x.imag, -0.25)))   # the time does not depend on values
    copy_s = compute_copy_seconds(ctx, timer, 2 * total)
    rows = []
    for n in (256, 1024, 4096):
        sample = (rng.standard_normal((64, n)) + 1j * rng.standard_normal((64, n))).astype(np.complex64)
        probe = ctx.tensor(sample)
        got = ctx.run(lambda rec: rec.fft(probe)).numpy()
        check_close(got, np.fft.fft(sample.astype(np.complex128)), f"fft {n}")
        mine = _ours(timer, ctx, lambda rec, n=n: rec.fft(x.reshape(-1, n), out=out.reshape(-1, n)))
        name = f"fft c2c 1-D {n} batched vs copy"
        nbytes = 2 * 8 * total
        rows.append(Result(SECTION, name, nbytes / mine / 1e9, "GB/s", "rec.copy of the same bytes (same run)",
                           nbytes / copy_s / 1e9, GOALS[name], note="bytes read + written", extra=times(mine, copy_s)))
    return rows


def _small_rows(ctx, timer: Timer, reps: int) -> list:
    import torch
    rng = np.random.default_rng(30)
    plane = (rng.standard_normal((512, 512)) + 1j * rng.standard_normal((512, 512))).astype(np.complex64)
    ocean = (rng.standard_normal((6, 512, 257)) + 1j * rng.standard_normal((6, 512, 257))).astype(np.complex64)
    p, o = ctx.tensor(plane), ctx.tensor(ocean)
    p_out, o_out = ctx.empty((512, 512), "complex64"), ctx.empty((6, 512, 512), "float32")
    ctx.run(lambda rec: (rec.fft2(p, out=p_out), rec.irfft2(o, out=o_out)))
    check_close(p_out.numpy(), np.fft.fft2(plane.astype(np.complex128)), "fft2 512")
    check_close(o_out.numpy(), np.fft.irfft2(ocean.astype(np.complex128)), "irfft2 6x512")
    tp, to = torch.from_numpy(plane).cuda(), torch.from_numpy(ocean).cuda()
    rows = []
    for name, ours, theirs in (("fft 512x512 single", lambda rec: rec.fft2(p, out=p_out), lambda: torch.fft.fft2(tp)),
                               ("ocean cascade 6x512 c2r", lambda rec: rec.irfft2(o, out=o_out),
                                lambda: torch.fft.irfft2(to))):
        mine = _ours(timer, ctx, ours)
        base = torch_seconds(theirs, reps, graph=True)
        rows.append(Result(SECTION, name, mine * 1e6, "µs", "torch.fft (cuFFT) in a CUDA graph, same GPU",
                           base * 1e6, GOALS[name], extra=times(mine, base)))
    rows.append(_bloom_row(ctx, timer, reps))
    return rows


def _bloom_row(ctx, timer: Timer, reps: int) -> Result:
    import torch
    name = "fft bloom 1024x2048"
    rng = np.random.default_rng(31)
    img_np = rng.uniform(0, 4, (3, 1024, 2048)).astype(np.float32)
    k_np = np.zeros((1024, 2048), np.float32)
    k_np[:9, :9] = rng.uniform(0, 1, (9, 9))
    img, k = ctx.tensor(img_np), ctx.tensor(k_np)
    k_spec = ctx.run(lambda rec: rec.rfft2(k))
    got = ctx.run(lambda rec: rec.fft_convolve(img, k_spec)).numpy()
    ref = np.fft.irfft2(np.fft.rfft2(img_np[0].astype(np.float64)) * np.fft.rfft2(k_np.astype(np.float64)),
                        s=(1024, 2048))
    check_close(got[0], ref, "fft bloom")
    mine = _ours(timer, ctx, lambda rec: rec.fft_convolve(img, k_spec))
    ti, tk = torch.from_numpy(img_np).cuda(), torch.fft.rfft2(torch.from_numpy(k_np).cuda())
    base = torch_seconds(lambda: torch.fft.irfft2(torch.fft.rfft2(ti) * tk, s=(1024, 2048)), reps, graph=True)
    return Result(SECTION, name, mine * 1e6, "µs", "torch: rfft2, product, irfft2 in a CUDA graph, same GPU",
                  base * 1e6, GOALS[name], note="rec.fft_convolve: three passes, the column pass fused")


def gpu_rows(ctx, quick: bool) -> list:
    if not torch_available():
        return [Result(SECTION, name, goal=GOALS[name], skipped="torch with CUDA is the baseline and is missing")
                for name in ROWS if "vs copy" not in name] + _guarded(lambda: _batched_rows(ctx, Timer(ctx, 5, rounds=3)),
                                                     [n for n in ROWS if "vs copy" in n])
    reps = 3 if quick else 10
    timer = Timer(ctx, reps, rounds=3)

    def ours() -> list:
        warm_up(ctx, 1.0)
        rows = _guarded(lambda: _big_rows(ctx, timer, reps), [n for n in ROWS if "1024x1024x32" in n])
        rows += _guarded(lambda: _batched_rows(ctx, timer), [n for n in ROWS if "vs copy" in n])
        small = Timer(ctx, 3 if quick else GRAPH_CALLS, rounds=3)
        return rows + _guarded(lambda: _small_rows(ctx, small, reps), ["fft 512x512 single", "ocean cascade 6x512 c2r",
                                                                         "fft bloom 1024x2048"])
    return with_vkfft(ours, 5 if quick else 20, ctx.limits.device_name)


def with_vkfft(ours, rounds: int, device: str) -> list:
    """``ours()``'s goal rows, then each VkFFT backend's rows beside them.
    VkFFT's programs compile (CPU only) while ``ours()`` times the GPU;
    they run after it, one at a time."""
    with ThreadPoolExecutor(max_workers=len(VKFFT_BACKENDS)) as pool:
        builds = {backend: pool.submit(vkfft_baseline.prepare, backend) for backend in VKFFT_BACKENDS}
        rows = ours()
        built = {backend: build.result() for backend, build in builds.items()}
    for backend, (exe, why) in built.items():
        reference, why = (None, why) if exe is None else vkfft_baseline.run(exe, backend, rounds, device)
        rows += vkfft_rows(rows, backend, reference, why)
    return rows


def _guarded(step, names) -> list:
    """A step's rows, or each of ``names`` skipped with its error."""
    try:
        return step()
    except Exception as e:
        return [Result(SECTION, name, goal=GOALS[name], skipped=f"{type(e).__name__}: {e}") for name in names]


def cpu_rows(ctx, quick: bool) -> list:
    """lavapipe: the goal rows skipped, small transforms against numpy."""
    out = [Result(SECTION, name, goal=GOALS[name], skipped="a GPU's goal: this device runs on the CPU")
           for name in ROWS]
    timer = Timer(ctx, reps=2, rounds=1 if quick else 3)
    rng = np.random.default_rng(32)
    x_np = (rng.standard_normal((8, 256, 256)) + 1j * rng.standard_normal((8, 256, 256))).astype(np.complex64)
    x = ctx.tensor(x_np)
    check_close(ctx.run(lambda rec: rec.fft2(x)).numpy(), np.fft.fft2(x_np.astype(np.complex128)), "fft2")
    t = timer.gpu_seconds(lambda rec: rec.fft2(x))
    out.append(Result(SECTION, "fft2 c2c 256x256x8 time vs numpy", t * 1e3, "ms", "numpy (same CPU)",
                      numpy_seconds(lambda: np.fft.fft2(x_np)) * 1e3, note="lavapipe runs on the CPU: lower ratio is better"))
    return out


def run(env) -> list:
    return run_on_device(env, gpu_rows, cpu_rows)


if __name__ == "__main__":
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
