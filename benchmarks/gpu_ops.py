"""Per-op GPU time from timestamp queries (``rec.timing``), against a
compute-shader copy measured in the same run.

Memory-bound ops are reported as effective bandwidth (the bytes the op must
move at least: each input read once, the output written once) over the
bandwidth of ``rec.copy`` between two tensors of the same size (bytes read +
written) — a shader copy, which moves what the memory can; on a GPU with
PyTorch that copy is itself judged against torch's ``copy_``.
vkCmdCopyBuffer is kept as an informational row only: on NVIDIA it runs on
a copy engine at about a tenth of the shader cores' bandwidth. matmul is
reported in GFLOP/s; on a GPU with PyTorch present, next to torch.matmul on
the same GPU (fp32 with TF32 off, and fp16). On a CPU Vulkan device
(lavapipe) each op is also timed against numpy doing the same work.

Ops that are not in this build yet are listed as skipped; they are picked
up automatically once registered.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import vulkan as vk
from vulkan import ffi

from .results import Result, skipped

SECTION = "gpu ops"
_TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT


def _has(name: str) -> bool:
    from guestcompute.ops.base import registered_ops
    return name in registered_ops()


class Timer:
    """GPU seconds per repetition of recorded work, from timestamp scopes:
    a warm-up pass, then ``reps`` passes inside one scope; the median over
    ``rounds`` command buffers."""

    def __init__(self, ctx, reps: int, rounds: int):
        self.ctx, self.reps, self.rounds = ctx, reps, rounds

    def gpu_seconds(self, body) -> float:
        times = []
        for _ in range(self.rounds):
            box = []

            def fn(rec):
                body(rec)                       # warm-up: first-dispatch compiles, caches
                with rec.timing("work"):
                    for _ in range(self.reps):
                        body(rec)
                box.append(rec)
            self.ctx.run(fn)
            self.ctx.retire()                   # as a host does once its frame is done: scratch is freed
            times.append(box[0].timings["work"] / 1e3 / self.reps)
        return statistics.median(times)


def copy_seconds(ctx, timer: Timer, nbytes: int) -> float:
    """GPU seconds of one vkCmdCopyBuffer of ``nbytes``, copies separated by
    transfer barriers (each copy overwrites the same destination)."""
    src, dst = ctx.empty((nbytes // 4,)), ctx.empty((nbytes // 4,))
    ctx.run(lambda rec: rec.fill(src, 1.5))
    region = ffi.new("VkBufferCopy *", {"srcOffset": 0, "dstOffset": 0, "size": nbytes})
    bar = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                       "srcAccessMask": vk.VK_ACCESS_TRANSFER_WRITE_BIT
                                       | vk.VK_ACCESS_SHADER_WRITE_BIT,
                                       "dstAccessMask": vk.VK_ACCESS_TRANSFER_WRITE_BIT
                                       | vk.VK_ACCESS_TRANSFER_READ_BIT})
    fns = ctx.device.fns

    def body(rec):
        cmd = rec.command_buffer
        fns.vkCmdPipelineBarrier(cmd, _TRANSFER | _COMPUTE, _TRANSFER, 0, 1, bar, 0, ffi.NULL, 0, ffi.NULL)
        fns.vkCmdCopyBuffer(cmd, src.buffer.handle, dst.buffer.handle, 1, region)
    t = timer.gpu_seconds(body)
    del src, dst
    return t


WARM_UP_S = 1.5


def compute_copy_seconds(ctx, timer: Timer, n: int) -> float:
    """GPU seconds of one compute-shader copy of ``n`` floats (``rec.copy``
    between two contiguous tensors): the yardstick of the bandwidth rows."""
    src, dst = ctx.empty((n,)), ctx.empty((n,))
    ctx.run(lambda rec: rec.fill(src, 0.75))
    # The yardstick is the section's first GPU work: bring the clocks up
    # first (an idle GPU measured it at 40 % of the same copy a minute later).
    start = time.perf_counter()
    while time.perf_counter() - start < WARM_UP_S:
        timer.gpu_seconds(lambda rec: rec.copy(src, out=dst))
    t = timer.gpu_seconds(lambda rec: rec.copy(src, out=dst))
    del src, dst
    return t


def numpy_seconds(fn, repeat: int = 5) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


# -- the memory-bound ops ------------------------------------------------------------

def _call(rec, name, *args, out=None, **kw):
    """``rec.<name>(..., out=out)``, without ``out`` when the op takes none."""
    fn = getattr(rec, name)
    if out is None:
        return fn(*args, **kw)
    try:
        return fn(*args, out=out, **kw)
    except TypeError:
        return fn(*args, **kw)


def bandwidth_cases(n: int, rows: int):
    """(label, op, bytes moved, make(ctx) -> (body, numpy_fn))."""
    cols = n // rows

    def binary(op):
        def make(ctx):
            a, b, c = ctx.empty((n,)), ctx.empty((n,)), ctx.empty((n,))
            ctx.run(lambda rec: (rec.fill(a, 1.25), rec.fill(b, -0.5)))
            an, bn, cn = np.full(n, 1.25, np.float32), np.full(n, -0.5, np.float32), np.empty(n, np.float32)
            return (lambda rec: getattr(rec, op)(a, b, out=c)), (lambda: getattr(np, {"add": "add", "mul": "multiply"}[op])(an, bn, out=cn))
        return make

    def unary(op, npfn):
        def make(ctx):
            a, c = ctx.empty((n,)), ctx.empty((n,))
            ctx.run(lambda rec: rec.fill(a, 0.75))
            an, cn = np.full(n, 0.75, np.float32), np.empty(n, np.float32)
            return (lambda rec: getattr(rec, op)(a, out=c)), (lambda: npfn(an, out=cn))
        return make

    def reduce_all(op, npfn):
        def make(ctx):
            a = ctx.empty((n,))
            ctx.run(lambda rec: rec.fill(a, 0.001))
            an = np.full(n, 0.001, np.float32)
            return (lambda rec: _call(rec, op, a)), (lambda: npfn(an))
        return make

    def reduce_rows(op, npfn, **kw):
        def make(ctx):
            a = ctx.empty((rows, cols))
            out = ctx.empty((rows,)) if op != "softmax" else ctx.empty((rows, cols))
            ctx.run(lambda rec: rec.fill(a, 0.5))
            an = np.full((rows, cols), 0.5, np.float32)
            return (lambda rec: _call(rec, op, a, out=out, **kw)), (lambda: npfn(an))
        return make

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    f = 4
    yield "add f32", "add", 3 * n * f, binary("add")
    yield "mul f32", "mul", 3 * n * f, binary("mul")
    yield "exp f32", "exp", 2 * n * f, unary("exp", np.exp)
    yield "sum f32 (all)", "sum", n * f, reduce_all("sum", np.sum)
    yield "sum f32 (rows)", "sum", n * f + rows * f, reduce_rows("sum", lambda x: x.sum(axis=-1), axis=-1)
    yield "max f32 (rows)", "max", n * f + rows * f, reduce_rows("max", lambda x: x.max(axis=-1), axis=-1)
    yield "softmax f32 (rows)", "softmax", 2 * n * f, reduce_rows("softmax", np_softmax, axis=-1)


COPY_ROW = "copy f32, compute shader (rec.copy)"


def copy_rows(ctx, timer: Timer, n: int, rows: int, on_cpu: bool, use_torch: bool) -> tuple:
    """The rows of the copies themselves and the compute copy's bandwidth
    (bytes per second) and torch's (or None) that the op rows are judged by."""
    t = compute_copy_seconds(ctx, timer, n)
    copy_bw, vk_bw = 2 * n * 4 / t, 2 * n * 4 / copy_seconds(ctx, timer, n * 4)
    size = f"{n * 4 / 2**20:.0f} MiB per tensor ({n} floats; rows: {rows}×{n // rows})"
    torch_bw, out = None, []
    if use_torch:
        try:
            torch_bw = torch_copy_bandwidth(n)
        except Exception as e:
            out.append(skipped(SECTION, "torch copy_ (same GPU)", f"{type(e).__name__}: {e}"))
    # The yardstick is judged too where a reference exists: torch's copy_ is an SM kernel.
    out.insert(0, Result(SECTION, COPY_ROW, copy_bw / 1e9, "GB/s",
                         "torch dst.copy_(src), same GPU" if torch_bw else "",
                         torch_bw / 1e9 if torch_bw else None, "ratio>=0.9" if torch_bw else "",
                         note=f"bytes read + written, {size}, {t * 1e3:.3f} ms per copy; "
                         "the baseline of every bandwidth row below"))
    out.append(Result(SECTION, "vkCmdCopyBuffer (informational)", vk_bw / 1e9, "GB/s",
                      "compute-shader copy (same run)", copy_bw / 1e9,
                      note="bytes read + written; may run on a copy engine slower than the shader cores"))
    if on_cpu:
        an, cn = np.full(n, 0.75, np.float32), np.empty(n, np.float32)
        out.append(Result(SECTION, "copy f32 time vs numpy", t * 1e3, "ms", "numpy (same CPU)",
                          numpy_seconds(lambda: np.copyto(cn, an)) * 1e3,
                          note="lavapipe runs on the CPU: lower ratio is better"))
    return out, copy_bw, torch_bw


def bandwidth_results(ctx, timer: Timer, n: int, rows: int, on_cpu: bool, use_torch: bool) -> list:
    out, copy_bw, torch_bw = copy_rows(ctx, timer, n, rows, on_cpu, use_torch)
    for label, op, nbytes, make in bandwidth_cases(n, rows):
        if not _has(op):
            out.append(skipped(SECTION, label, f"op {op!r} not in this build yet"))
            continue
        try:
            body, np_fn = make(ctx)
            t = timer.gpu_seconds(body)
        except Exception as e:      # an op present but not accepting this form: say so, keep going
            out.append(skipped(SECTION, label, f"{type(e).__name__}: {e}"))
            continue
        bw = nbytes / t / 1e9
        spec = spec_of(ctx, body)
        # The bandwidth goals are the GPU's; a CPU device gets a numpy row instead.
        goal = "" if on_cpu else ("ratio>=0.9" if op in ("add", "mul", "exp") else "ratio>=0.8")
        out.append(Result(SECTION, f"{label} bandwidth vs compute copy", bw, "GB/s",
                          "compute-shader copy (same run)", copy_bw / 1e9, goal,
                          note=f"{t * 1e3:.3f} ms per op" + (f"; kernel {spec}" if spec else "")
                          + (f"; {bw * 1e9 / torch_bw:.0%} of torch copy" if torch_bw else "")))
        if on_cpu:
            t_np = numpy_seconds(np_fn)
            out.append(Result(SECTION, f"{label} time vs numpy", t * 1e3, "ms", "numpy (same CPU)",
                              t_np * 1e3, note="lavapipe runs on the CPU: lower ratio is better"))
    return out


def spec_of(ctx, body) -> str:
    """Which kernel an op picked (the family and mode of its first dispatch)."""
    class Probe:
        def __getattr__(self, name):
            from guestcompute.ops.base import registered_ops
            fn = registered_ops()[name]
            return lambda *a, **kw: self.__dict__.setdefault("result", fn(ctx, *a, **kw))
    probe = Probe()
    try:
        body(probe)
    except Exception:
        return ""
    result = probe.__dict__.get("result")
    if result is None or not result.dispatches:
        return ""
    spec = result.dispatches[0].spec
    bits = [spec.family] + [f"{k}={v}" for k, v in spec.params if k in ("mode", "width", "kernel", "tile",
                                                                           "variant", "reduce")]
    return " ".join(bits)


# -- matmul -------------------------------------------------------------------------

def matmul_results(ctx, timer: Timer, size: int, on_cpu: bool, use_torch: bool) -> list:
    out = []
    if not _has("matmul"):
        return [skipped(SECTION, "matmul", "op 'matmul' not in this build yet")]
    rng = np.random.default_rng(0)
    for dtype, acc in (("float32", "float32"), ("float16", "float32"), ("float16", "float16")):
        label = f"matmul {dtype}" + (", fp16 accumulators" if acc == "float16" else "")
        if dtype == "float16" and not ctx.caps.float16_storage:
            out.append(skipped(SECTION, label, "device without 16-bit storage"))
            continue
        an = rng.standard_normal((size, size)).astype(dtype)
        bn = rng.standard_normal((size, size)).astype(dtype)
        a, b, c = ctx.tensor(an), ctx.tensor(bn), ctx.empty((size, size), dtype)
        body = lambda rec: rec.matmul(a, b, out=c, accumulate=acc)  # noqa: E731
        try:
            t = timer.gpu_seconds(body)
        except Exception as e:
            out.append(skipped(SECTION, label, f"{type(e).__name__}: {e}"))
            continue
        flops = 2 * size ** 3
        gf = flops / t / 1e9
        # correct first: the first rows against float64 (every row for small sizes)
        rows_checked = size if size <= 1024 else 16
        ref = an[:rows_checked].astype(np.float64) @ bn.astype(np.float64)
        got = c.numpy()[:rows_checked].astype(np.float64)
        err = f"; rel. error {np.linalg.norm(got - ref) / np.linalg.norm(ref):.1e}"
        if not np.isfinite(got).all() or np.linalg.norm(got - ref) > 1e-2 * np.linalg.norm(ref):
            out.append(skipped(SECTION, label, f"wrong result{err}"))
            continue
        kernel = spec_of(ctx, body)
        note = f"{size}×{size}×{size}, {t * 1e3:.3f} ms; kernel {kernel}{err}{gpu_clock_note()}"
        base_name, base = "", None
        if use_torch:
            base = torch_matmul_gflops(size, dtype)
            base_name = "torch.matmul (same GPU" + (", TF32 off)" if dtype == "float32" else ")")
        elif on_cpu:
            base = flops / numpy_seconds(lambda: an @ bn, repeat=3) / 1e9
            base_name = "numpy matmul (same CPU)"
        out.append(Result(SECTION, label, gf, "GFLOP/s", base_name, base,
                          "ratio>=0.5" if use_torch else "", note=note))
        del a, b, c
    return out


# Two fp16 NaNs in one uint32 word: what a reference's output is filled with first.
NAN_PAIR = 0x7E007E00


def reference_rates(flops: float, times: dict, failures: list) -> str:
    """A reference's note: each build's or variant's rate ("name N TFLOP/s",
    from its GPU seconds in ``times``), then what failed to run."""
    return (", ".join(f"{k} {flops / v / 1e12:.0f} TFLOP/s" for k, v in times.items())
            + (f"; failed: {'; '.join(failures)}" if failures else ""))


def fill_with_nans(ctx, words) -> None:
    """Fill a uint32 tensor of fp16 pairs with NaNs, so that a kernel which
    then writes nothing fails its check against numpy instead of passing on
    an earlier run's results."""
    ctx.run(lambda rec: rec.fill(words, NAN_PAIR))


def warm_up(ctx, seconds: float = 1.0) -> None:
    """Keep the GPU busy for ``seconds`` first: an idle GPU clocks down, and
    short timings taken right after read several times low."""
    a, b = ctx.empty((1 << 24,)), ctx.empty((1 << 24,))
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ctx.run(lambda rec: [rec.copy(a, out=b) for _ in range(50)])
        ctx.retire()


def gpu_clock_note() -> str:
    """"; SM clock X of Y MHz" from nvidia-smi right after a timing (an idle
    GPU clocks down, and a low clock explains a low number), or "" where
    the device exposes no clocks that way."""
    import shutil
    import subprocess
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        proc = subprocess.run([exe, "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10)
        now, top = (int(x) for x in proc.stdout.splitlines()[0].split(","))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return ""
    return f"; SM clock {now} of {top} MHz"


def torch_matmul_gflops(size: int, dtype: str) -> float:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dt = {"float32": torch.float32, "float16": torch.float16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=dt, generator=g)
    b = torch.randn(size, size, device="cuda", dtype=dt, generator=g)
    return 2 * size ** 3 / torch_seconds(lambda: torch.matmul(a, b), 10) / 1e9


def torch_copy_bandwidth(n: int) -> float:
    """Bytes read + written per second by ``dst.copy_(src)`` of ``n`` floats."""
    import torch
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    seconds = torch_seconds(lambda: dst.copy_(src), 10)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / seconds


# Calls a CUDA graph of torch_seconds holds; rows timed against such a graph
# time as many of their own calls a scope, so that fixed costs spread alike.
GRAPH_CALLS = 20


def torch_seconds(fn, reps: int, graph: bool = False) -> float:
    """GPU seconds of ``fn()`` from CUDA events: eager repetitions, or
    replays of a CUDA graph of GRAPH_CALLS calls (per call)."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    calls = 1
    if graph:
        calls, g = GRAPH_CALLS, torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        step = g.replay
    else:
        step = fn
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / calls)
    return statistics.median(times)


def runs_on_cpu(device) -> bool:
    """Whether the run's device (a name substring, an index or None) is a
    CPU Vulkan device (lavapipe), asked of a context made and closed here."""
    from guestcompute.context import Context
    ctx = Context.create(device)
    try:
        return ctx.limits.device_type == vk.VK_PHYSICAL_DEVICE_TYPE_CPU
    finally:
        ctx.close()


def run_on_device(env, gpu_rows, cpu_rows) -> list:
    """A section's rows on the run's device: ``cpu_rows(ctx, quick)`` on a
    CPU Vulkan device (lavapipe), else ``gpu_rows(ctx, quick)``."""
    from guestcompute.context import Context
    ctx = Context.create(env.device)
    try:
        if ctx.limits.device_type == vk.VK_PHYSICAL_DEVICE_TYPE_CPU:
            return cpu_rows(ctx, env.quick)
        return gpu_rows(ctx, env.quick)
    finally:
        ctx.close()


def hold_cuda_context():
    """Create torch's CUDA context and return a tensor that keeps it for as
    long as it lives, or None where torch has no CUDA.

    Why: with driver 580.159.04 the H200 ran the Vulkan compute of a process
    that held no CUDA context at 570-975 MHz SM clock, and at 1,980 MHz once
    the same process held one (the same run: the look-back skeleton's tile
    scan 237 vs 75 us, a 2^25 key sort 5.1-5.9 vs 1.99 ms). The CUDA
    baselines (CUB, torch) always run with a context, so the suite holds one
    for the whole run and every Vulkan number is taken at their clock."""
    if not torch_available():
        return None
    import torch
    keep = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return keep


def torch_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def run(env) -> list:
    from guestcompute.context import Context
    ctx = Context.create(env.device)
    try:
        on_cpu = ctx.limits.device_type == vk.VK_PHYSICAL_DEVICE_TYPE_CPU
        if on_cpu:
            n, rows, size, reps = (1 << 20, 256, 256, 3) if env.quick else (1 << 22, 1024, 512, 5)
        else:
            n, rows, size, reps = (1 << 24, 4096, 2048, 10) if env.quick else (1 << 28, 65536, 4096, 20)
        timer = Timer(ctx, reps, rounds=3)
        use_torch = not on_cpu and torch_available()
        res = bandwidth_results(ctx, timer, n, rows, on_cpu, use_torch)
        if not on_cpu:
            warm_up(ctx, 1.0)         # matmul timings are short: an idle GPU reads several times low
        res += matmul_results(ctx, Timer(ctx, max(2, reps // 4), rounds=3), size, on_cpu, use_torch)
        return res
    finally:
        ctx.close()
