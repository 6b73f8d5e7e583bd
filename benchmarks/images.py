"""Images against the buffer path they replace, in one run.

- Recording cost (host CPU): one image op (``rec.copy`` image -> image, 64
  distinct pairs per frame) against the same op on tensors of the same
  bytes; goal: at most 1.2x.
- GPU: an rgba8 image copy and an rgba16f -> rgba8 tonemap in GB/s against
  the compute-shader copy of the same bytes between tensors (``rec.copy``,
  goal: at least 80 %) and, on a GPU with PyTorch, torch's copy; a
  3840x2160 rgba16f gaussian blur read and written in place against the
  buffer route it replaces (copy the image into a float32 tensor, blur the
  tensor, copy back), goal: faster. The GPU-time goals are a GPU's.

Run: ``python -m benchmarks.images`` (or ``--only images`` in the suite).
"""
from __future__ import annotations


import numpy as np
import vulkan as vk

from guestcompute.testing import HeadlessHost

from .gpu_ops import Timer, torch_available, torch_copy_bandwidth, warm_up
from .results import Result, interleaved, standalone_main

SECTION = "images"
N_PAIRS = 64


def record_cost(device, frames: int) -> Result:
    """Host CPU per op: 64 image copies vs 64 tensor copies of the same bytes
    per frame, each into a command buffer that is begun again every frame."""
    host = HeadlessHost("modern", validation=False, device=device)
    ctx = host.adopt()
    try:
        side = 64
        images = [ctx.image((side, side), "rgba8_unorm") for _ in range(N_PAIRS + 1)]
        tensors = [ctx.empty((side, side), "uint32") for _ in range(N_PAIRS + 1)]
        cmd = host.allocate()

        def frame(items):
            def run():
                host.begin(cmd)
                with ctx.record(cmd) as rec:
                    for i in range(N_PAIRS):
                        rec.copy(items[i], out=items[i + 1])
                host.fns.vkEndCommandBuffer(cmd)
            return run
        times = interleaved({"image": frame(images), "buffer": frame(tensors)}, repeat=frames, warmup=3)
    finally:
        ctx.close()
        host.close()
    return Result(SECTION, "record one image op (rec.copy image->image)", times["image"] / N_PAIRS * 1e6,
                  "µs/op", "the same op on tensors of the same bytes", times["buffer"] / N_PAIRS * 1e6,
                  "ratio<=1.2")


def gpu_results(ctx, timer: Timer, w: int, h: int, on_gpu: bool, use_torch: bool) -> list:
    rng = np.random.default_rng(0)
    # Everything is made first: host-side setup between the warm-up and the
    # timings would let an idle GPU clock down again.
    a = ctx.image_from(rng.integers(0, 256, (h, w, 4), dtype=np.uint8), "rgba8_unorm")
    b = ctx.image((w, h), "rgba8_unorm")
    ta, tb = ctx.empty((h, w), "uint32"), ctx.empty((h, w), "uint32")
    hdr = ctx.image_from(rng.uniform(0, 4, (h, w, 4)).astype(np.float16), "rgba16f")
    mid = ctx.image((w, h), "rgba16f")
    t = ctx.empty((h, w, 4))

    def buffer_route(rec):
        rec.copy(hdr, out=t)
        rec.gaussian_blur(t, 2.0, out=t)
        rec.copy(t, out=mid)
    if on_gpu:
        warm_up(ctx)
    nbytes = 2 * w * h * 4                   # the copy: 4 bytes per texel read and written
    buf_s = timer.gpu_seconds(lambda rec: rec.copy(ta, out=tb))
    img_s = timer.gpu_seconds(lambda rec: rec.copy(a, out=b))
    tm_s = timer.gpu_seconds(lambda rec: rec.tonemap(hdr, b, exposure=0.8, srgb=False))
    image_s = timer.gpu_seconds(lambda rec: rec.gaussian_blur(hdr, 2.0, out=mid))
    route_s = timer.gpu_seconds(buffer_route)
    tm_bytes = w * h * 12                    # tonemap: 8 bytes read, 4 written per texel
    # The GPU-time goals are a GPU's: lavapipe emulates image access per texel on the CPU.
    at_least, at_most = ("ratio>=0.8", "ratio<=1.0") if on_gpu else ("", "")
    out = [Result(SECTION, f"copy rgba8 image {w}x{h} vs compute copy", nbytes / img_s / 1e9, "GB/s",
                  "compute-shader tensor copy of the same bytes (rec.copy)", nbytes / buf_s / 1e9, at_least),
           Result(SECTION, f"tonemap rgba16f->rgba8 {w}x{h} vs compute copy", tm_bytes / tm_s / 1e9, "GB/s",
                  "compute-shader tensor copy bandwidth (above)", nbytes / buf_s / 1e9, at_least),
           Result(SECTION, f"gaussian_blur rgba16f {w}x{h} in place (ms)", image_s * 1e3, "ms",
                  "copy out to float32, blur, copy back", route_s * 1e3, at_most)]
    if use_torch:
        torch_bw = torch_copy_bandwidth(w * h)
        out.insert(1, Result(SECTION, f"copy rgba8 image {w}x{h} vs torch", nbytes / img_s / 1e9, "GB/s",
                             "torch dst.copy_(src), same bytes", torch_bw / 1e9, "ratio>=0.8"))
    return out


def run(env) -> list:
    from guestcompute.context import Context
    ctx = Context.create(env.device)
    try:
        on_cpu = ctx.limits.device_type == vk.VK_PHYSICAL_DEVICE_TYPE_CPU
        res = [record_cost(env.device, 10 if env.quick else 40)]
        if on_cpu:
            w, h, reps = (256, 144, 2) if env.quick else (640, 360, 3)
        else:
            w, h, reps = (1920, 1080, 10) if env.quick else (3840, 2160, 20)
        timer = Timer(ctx, reps, rounds=3)
        res += gpu_results(ctx, timer, w, h, not on_cpu, not on_cpu and torch_available())
        return res
    finally:
        ctx.close()


if __name__ == "__main__":
    import sys
    sys.exit(standalone_main(__doc__.split("\n\n")[0], [run]))
