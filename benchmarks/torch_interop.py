"""Guest tensors shared with PyTorch on the same GPU: a frame loop checked
for exact results, and what the hand-off costs next to copying the tensors
through host memory in the same run.

The frame: a guest op writes ``x``; torch reads ``x`` and writes ``y``; a
guest op reads ``y``. Both tensors are exportable guest tensors that torch
sees through ``t.to_torch()``; one shared timeline orders the three steps
on the GPU (guest submission signals, torch's stream waits and signals, the
next guest submission waits). The CPU never waits inside the loop.

- ``exact``: FRAMES frames, in hand-off mode (``ctx.submit``) and in
  injection mode (a host's command buffer, the host's submit carrying the
  timeline points); the guest accumulates what torch wrote, int32, so the
  final sum is exact or wrong. Plus ``torch.testing.assert_close`` of torch's
  views (contiguous, strided, float16, uint8, DLPack) against ``.numpy()``.
- ``exchange``: per frame, moving a 64 MB tensor guest → torch → guest: the
  shared-timeline hand-off (two submissions and a stream wait and signal,
  zero copies) vs copying through host memory (``t.numpy()``, upload to
  torch, torch's result back, ``t.write``).
- ``frame``: the whole frame with 64 MB ops, both ways.

Needs torch with CUDA and a Vulkan device CUDA also sees (UUIDs match);
elsewhere the rows report themselves skipped.

Run: ``python -m benchmarks.torch_interop [--frames N] [--mb M]`` (prints JSON).
"""
from __future__ import annotations

import faulthandler
import importlib
import sys
import time

import numpy as np
import vulkan as vk

from .results import Result

SECTION = "torch interop"
FRAMES = 1000


def _torch():
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def exact_handoff_loop(ctx, torch, frames: int) -> dict:
    """Hand-off mode: guest submit → torch stream → guest submit, no CPU wait."""
    n = 1 << 16
    tl = ctx.shared_timeline()
    cuda_tl = ctx.cuda_timeline(tl)
    base = ctx.tensor(np.arange(n, dtype=np.int32) % 1000)
    x, y = ctx.empty((n,), "int32", exportable=True), ctx.empty((n,), "int32", exportable=True)
    acc = ctx.zeros((n,), "int32")
    xt, yt = x.to_torch(), y.to_torch()
    stream = torch.cuda.current_stream()
    start = time.perf_counter()
    for f in range(frames):
        if f % 250 == 0:
            _progress("hand-off frame", f)
        ctx.submit(lambda rec: rec.add(base, f % 7, out=x), signal=[tl.signal_point()])
        cuda_tl.wait(stream=stream)
        torch.mul(xt, 3, out=yt)
        v = cuda_tl.signal(stream=stream)
        s = ctx.submit(lambda rec: rec.add(acc, y, out=acc), wait=[tl.wait_point(v)])
        ctx.retire_when(submission=s)
    loop_s = time.perf_counter() - start
    s.wait()
    expect = np.zeros(n, np.int64)
    for f in range(frames):
        expect += 3 * ((np.arange(n) % 1000) + f % 7)
    got = acc.numpy()
    cuda_tl.close()
    return {"frames": frames, "exact": bool(np.array_equal(got, expect.astype(np.int32))),
            "loop_ms_per_frame": loop_s / frames * 1e3}


def exact_injected_loop(ctx_host, torch, frames: int) -> dict:
    """Injection mode: guest ops in a host's command buffers; the host's own
    submits carry the timeline's signal and wait points."""
    host, ctx = ctx_host
    n = 1 << 16
    tl = ctx.shared_timeline()
    cuda_tl = ctx.cuda_timeline(tl)
    x, y = ctx.empty((n,), "int32", exportable=True), ctx.empty((n,), "int32", exportable=True)
    acc = ctx.zeros((n,), "int32")
    xt, yt = x.to_torch(), y.to_torch()
    compute = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    cmds = []
    for f in range(frames):
        if f % 250 == 0:
            _progress("injected frame", f)
        cmd = host.begin()
        with ctx.record(cmd) as rec:
            if f:
                rec.add(acc, y, out=acc)        # what torch wrote last frame
            rec.fill(x, f)
        # The wait point first: taken after this submission's own signal
        # point it would default to that value, and the queue would wait forever.
        wait = [tl.wait_point(stages=compute)] if f else []
        point = tl.signal_point()
        host.submit(cmd, wait_for=wait, signal=[point], fence=False, block=False, free=False)
        cmds.append((cmd, point[1]))
        cuda_tl.wait()
        torch.add(xt, 1, out=yt)
        cuda_tl.signal()
        if len(cmds) > 64:          # free the oldest command buffers once the timeline passed them
            tl.wait(cmds[31][1])
            host.free([c for c, _ in cmds[:32]])
            del cmds[:32]
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        rec.add(acc, y, out=acc)
    host.submit(cmd, wait_for=[tl.wait_point(stages=compute)])
    host.free([c for c, _ in cmds])
    got = acc.numpy()
    expect = sum(f + 1 for f in range(frames))
    cuda_tl.close()
    return {"frames": frames, "exact": bool((got == expect).all())}


def views_match(ctx, torch) -> dict:
    """torch's views pass assert_close against the guest's own readback."""
    rng = np.random.default_rng(5)
    a = ctx.tensor(rng.standard_normal((64, 48)).astype(np.float32), exportable=True)
    h = ctx.tensor(rng.standard_normal((33, 7)).astype(np.float16), exportable=True)
    b = ctx.tensor(rng.integers(0, 255, (5, 9, 11)).astype(np.uint8), exportable=True)
    checked = []
    for t in (a, a[3:40:2, 5:], a.T, h, b[1:, ::3, 2:]):
        torch.testing.assert_close(t.to_torch().cpu(), torch.from_numpy(np.ascontiguousarray(t.numpy())))
        checked.append(str(t.shape))
    torch.testing.assert_close(torch.from_dlpack(a).cpu(), torch.from_numpy(a.numpy()))
    # torch writes, the guest reads (no guest work in flight: a plain sync suffices here)
    at = a.to_torch()
    at.mul_(2)
    torch.cuda.synchronize()
    doubled = ctx.run(lambda rec: rec.copy(a)).numpy()
    torch.testing.assert_close(torch.from_numpy(doubled), at.cpu())
    return {"views": checked, "dlpack": True, "torch_writes_seen": True}


def exchange_costs(ctx, torch, mb: int, frames: int) -> dict:
    """Per-frame cost of moving an ``mb`` MB tensor guest → torch → guest."""
    n = mb * (1 << 20) // 4
    tl = ctx.shared_timeline()
    cuda_tl = ctx.cuda_timeline(tl)
    x, y = ctx.zeros((n,), exportable=True), ctx.zeros((n,), exportable=True)
    xt, yt = x.to_torch(), y.to_torch()
    stream = torch.cuda.current_stream()
    one = ctx.zeros((1,))

    def zero_copy(work: bool) -> float:
        s = None
        for f in range(frames + 5):
            if f == 5:
                s.wait()
                torch.cuda.synchronize()
                start = time.perf_counter()
            ctx.submit((lambda rec: rec.add(x, 1.0, out=x)) if work else (lambda rec: rec.fill(one, 1.0)),
                       signal=[tl.signal_point()])
            cuda_tl.wait(stream=stream)
            if work:
                torch.mul(xt, 2.0, out=yt)
            v = cuda_tl.signal(stream=stream)
            s = ctx.submit((lambda rec: rec.add(y, 1.0, out=y)) if work else (lambda rec: rec.fill(one, 2.0)),
                           wait=[tl.wait_point(v)])
            ctx.retire_when(submission=s)
        s.wait()
        return (time.perf_counter() - start) / frames

    def through_host(work: bool) -> float:
        reps = max(3, frames // 20)
        for r in range(reps + 1):
            if r == 1:
                start = time.perf_counter()
            if work:
                ctx.run(lambda rec: rec.add(x, 1.0, out=x))
            staged = torch.from_numpy(x.numpy()).to("cuda")       # guest → host → torch
            out = staged * 2.0 if work else staged
            y.write(out.cpu().numpy())                             # torch → host → guest
            if work:
                ctx.run(lambda rec: rec.add(y, 1.0, out=y))
        return (time.perf_counter() - start) / reps

    found = {"mb": mb, "handoff_ms": zero_copy(False) * 1e3, "host_copy_ms": through_host(False) * 1e3,
             "frame_zero_copy_ms": zero_copy(True) * 1e3, "frame_host_copy_ms": through_host(True) * 1e3}
    cuda_tl.close()
    return found


def measure(device=None, frames: int = FRAMES, mb: int = 64) -> dict:
    import guestcompute as gc
    from guestcompute.testing import HeadlessHost
    torch = _torch()
    if torch is None:
        return {"skipped": "torch with CUDA is not available"}
    ctx = gc.Context.create(device)
    try:
        if not (ctx.caps.external_memory_fd and ctx.caps.external_timelines):
            return {"skipped": f"{ctx.limits.device_name} does not export memory and timeline semaphores"}
        found = {"device": ctx.limits.device_name, "torch": torch.__version__}
        for name, step in (("views", lambda: views_match(ctx, torch)),
                           ("handoff_loop", lambda: exact_handoff_loop(ctx, torch, frames)),
                           ("costs", lambda: exchange_costs(ctx, torch, mb, 200))):
            found[name] = step()
            _progress(name, found[name])
    finally:
        ctx.close()
    host = HeadlessHost("modern", validation=False, device=device)
    try:
        hctx = host.adopt()
        try:
            found["injected_loop"] = exact_injected_loop((host, hctx), torch, frames)
            _progress("injected_loop", found["injected_loop"])
        finally:
            hctx.close()
    finally:
        host.close()
    return found


def _progress(step: str, found) -> None:
    print(f"[torch interop] {step}: {found}", file=sys.stderr, flush=True)


def run(env) -> list:
    found = measure(env.device, 200 if env.quick else FRAMES)
    if "skipped" in found:
        return [Result(SECTION, "guest → torch → guest frame loop", skipped=found["skipped"])]
    c = found["costs"]
    loop, inj = found["handoff_loop"], found["injected_loop"]
    return [
        Result(SECTION, f"frame loop, {loop['frames']} frames, hand-off mode: exact", float(loop["exact"]), "bool",
               goal="value>=1", note=f"{loop['loop_ms_per_frame']:.3f} ms/frame issued, no CPU wait in the loop"),
        Result(SECTION, f"frame loop, {inj['frames']} frames, injection mode: exact", float(inj["exact"]), "bool",
               goal="value>=1"),
        Result(SECTION, f"{c['mb']} MB guest → torch → guest, exchange only", c["handoff_ms"], "ms/frame",
               "copy through host memory", c["host_copy_ms"], "ratio<=0.01",
               note="shared timeline, zero copies, vs t.numpy() → torch upload → download → t.write"),
        Result(SECTION, f"{c['mb']} MB guest → torch → guest, whole frame", c["frame_zero_copy_ms"], "ms/frame",
               "copy through host memory", c["frame_host_copy_ms"],
               note="guest op, torch op, guest op on the 64 MB tensors"),
    ]


def main(argv=None) -> int:
    import argparse
    import json
    p = argparse.ArgumentParser(description="guest ↔ torch frame loop: exactness and hand-off cost")
    p.add_argument("--frames", type=int, default=FRAMES)
    p.add_argument("--mb", type=int, default=64)
    p.add_argument("--device")
    p.add_argument("--watchdog", type=float, help="after this many seconds print every thread's stack and exit")
    args = p.parse_args(argv)
    if args.watchdog:
        faulthandler.dump_traceback_later(args.watchdog, exit=True)
    print(json.dumps(measure(args.device, args.frames, args.mb), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
