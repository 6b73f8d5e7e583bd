"""What both demos share: a host renderer that adopted guestcompute, the
command-line flags, the frame loop with its statistics, and the report.

The host is :class:`demos.host.HostRenderer`, which knows nothing about
guestcompute. The one place the two meet at start-up is the device: the
renderer asks ``configure_device`` what to enable, and we answer with
``gc.requirements()`` — then adopt the device the renderer created. Every
frame the demo records guest work into the renderer's command buffer through
the two hooks ``record_before_pass`` / ``record_after_pass``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import vulkan as vk

import guestcompute as gc

from .host import HostRenderer

# Particles by default: a GPU gets a million; a CPU device (lavapipe) gets
# fewer so that the window stays interactive.
GPU_PARTICLES = 1_000_000
CPU_PARTICLES = 150_000
SCOPE_FRAMES_KEPT = 4096


def parser(module: str, doc: str, default_frames_headless: int = 60,
           cpu_particles: int = CPU_PARTICLES) -> argparse.ArgumentParser:
    """The flags every demo takes; the description is the first paragraph of ``doc``."""
    description = " ".join(doc.split("\n\n")[0].split())
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    p.add_argument("--headless", action="store_true",
                   help="render offscreen (no window); implied when no display is available")
    p.add_argument("--frames", type=int, default=None,
                   help=f"frames to render (default: {default_frames_headless} headless, "
                        "until the window is closed otherwise)")
    p.add_argument("--screenshot", type=Path, default=None,
                   help="write the last frame as PNG (headless mode)")
    p.add_argument("--particles", type=int, default=None,
                   help=f"particle count (default: {GPU_PARTICLES:,} on a GPU, "
                        f"{cpu_particles:,} on a CPU device)")
    p.add_argument("--device", default=None, help="substring of the Vulkan device name to use")
    p.add_argument("--validation", action="store_true",
                   help="enable the Khronos validation layer (with synchronization validation); "
                        "the exit status is 1 if it reports anything")
    p.add_argument("--size", type=int, nargs=2, default=(800, 600), metavar=("W", "H"),
                   help="window / image size (default: 800 600)")
    p.set_defaults(default_frames_headless=default_frames_headless, cpu_particles=cpu_particles)
    return p


def guest_requirements(physical_device, api_version):
    """The renderer's ``configure_device`` hook: enable what guestcompute
    recommends for this device (all of it optional)."""
    req = gc.requirements(physical_device, api_version)
    if tuple(api_version) >= (1, 1) and req.core_features:
        # Core features too (storage writes to BGRA images without a format
        # qualifier), in a VkPhysicalDeviceFeatures2 at the head of the chain.
        return req.device_extensions, req.features2_chain()
    return req.device_extensions, (req.feature_chain() if req.features else None)


@dataclass
class FrameStats:
    """Per-frame wall time and CPU time spent inside guest recording."""
    frame_s: list = field(default_factory=list)
    record_s: list = field(default_factory=list)
    # The first frame may create pipelines and fill caches: leave it out.
    warmup: int = 1

    def steady(self, values):
        return values[self.warmup:] if len(values) > self.warmup else values

    @property
    def fps(self) -> float:
        frames = self.steady(self.frame_s)
        return len(frames) / sum(frames) if frames and sum(frames) > 0 else 0.0

    @property
    def record_us(self) -> float:
        """Median CPU µs per frame the guest spent recording."""
        values = self.steady(self.record_s)
        return 1e6 * statistics.median(values) if values else 0.0


@dataclass
class Result:
    frames: int
    fps: float
    record_us: float
    validation_messages: list
    last_frame: np.ndarray | None     # (H, W, 4) uint8, headless only
    gpu_frame_ms: float | None = None  # median GPU time of a frame's command buffer
    scopes_ms: dict = field(default_factory=dict)  # median GPU ms of each rec.timing scope per frame


class GuestApp:
    """A :class:`HostRenderer` plus the guestcompute context adopted on its device.

    ``ctx.record`` calls go through :meth:`record`, which times them; the
    frame loop in :meth:`run` retires guest epochs as frames complete.
    """

    def __init__(self, args, title: str, hdr: bool = False, blend: str = "additive"):
        self.title = title
        self.renderer = HostRenderer(
            *args.size, title=title, headless=args.headless, device_name=args.device,
            validation=args.validation, configure_device=guest_requirements, hdr=hdr, blend=blend,
            # The post-process reads and writes the rendered images themselves.
            extra_image_usage=vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT)
        r = self.renderer
        try:
            self.ctx = gc.Context.adopt(
                instance=r.instance, physical_device=r.physical_device, device=r.device,
                queue_family_index=r.queue_family_index, api_version=r.api_version,
                enabled_extensions=r.enabled_extensions, features=r.features_chain,
                # Used outside frames only: uploads at start-up (ctx.tensor into
                # device-local memory) and the demos' readback checks at exit.
                # Recording never submits.
                queue=r.queue)
        except BaseException:
            r.close()
            raise
        self.stats = FrameStats()
        # Per retired frame that had timing scopes: {rec.timing scope: GPU ms};
        # the latest frames only, so that a window left open does not grow it forever.
        self.scope_ms: deque = deque(maxlen=SCOPE_FRAMES_KEPT)
        self._record_s = 0.0
        self._slot_epochs: dict[int, int] = {}

    @property
    def on_cpu(self) -> bool:
        props = vk.vkGetPhysicalDeviceProperties(self.renderer.physical_device)
        return props.deviceType == vk.VK_PHYSICAL_DEVICE_TYPE_CPU

    def default_particles(self, args) -> int:
        if args.particles is not None:
            if args.particles <= 0:
                raise SystemExit("--particles must be positive")
            return args.particles
        return args.cpu_particles if self.on_cpu else GPU_PARTICLES

    def particle_buffers(self, args, indexed: bool = False):
        """Announce the device and particle count, and make the renderer's
        position and colour vertex buffers for that many particles (and an
        index buffer for the draw order with ``indexed``)."""
        renderer = self.renderer
        count = self.default_particles(args)
        print(f"device: {renderer.device_name}; particles: {count:,}; "
              f"{'offscreen' if renderer.headless else 'window'} {renderer.extent[0]}x{renderer.extent[1]}")
        return count, renderer.create_vertex_buffers(count, indexed=indexed)

    def record(self, cmd, fn):
        """Record ``fn(rec)`` into the host's ``cmd``, timing the CPU cost."""
        start = time.perf_counter()
        with self.ctx.record(cmd) as rec:
            fn(rec)
        self._record_s += time.perf_counter() - start

    def run(self, frames: int | None, before_pass, after_pass=None, status=None, resolve=None) -> int:
        """Render until ``frames`` frames are done (or the window closes).

        ``before_pass(cmd, frame)``, ``after_pass(cmd, frame)`` and (HDR
        mode) ``resolve(cmd, frame)`` record the frame's guest work;
        ``status()`` returns a short text for the title.
        """
        renderer = self.renderer
        ctx = self.ctx

        def before(cmd):
            # frame() waited for this slot's fence: the frame that last used
            # the slot is complete, and so is the guest work recorded in it.
            slot = renderer.current_frame_slot
            if slot in self._slot_epochs:
                ctx.retire(self._slot_epochs[slot])
                scopes = ctx.timings(self._slot_epochs[slot])
                if scopes:
                    self.scope_ms.append(scopes)
            before_pass(cmd, renderer.frame_count)

        def after(cmd):
            if after_pass is not None:
                after_pass(cmd, renderer.frame_count)
            if resolve is None:
                end_of_guest_work()

        def resolve_hook(cmd):
            resolve(cmd, renderer.frame_count)
            end_of_guest_work()

        def end_of_guest_work():
            # Everything the guest recorded for this frame belongs to this epoch.
            self._slot_epochs[renderer.current_frame_slot] = ctx.advance_epoch()

        last_title = time.perf_counter()
        while frames is None or renderer.frame_count < frames:
            self._record_s = 0.0
            start = time.perf_counter()
            if not renderer.frame(record_before_pass=before, record_after_pass=after,
                                  record_resolve=resolve_hook if resolve is not None else None):
                break
            self.stats.frame_s.append(time.perf_counter() - start)
            self.stats.record_s.append(self._record_s)
            now = time.perf_counter()
            if now - last_title > 0.5:
                last_title = now
                text = self.status_line(status)
                renderer.set_title(f"{self.title} — {text}")
        return renderer.frame_count

    def scope_median_ms(self, name: str, skip: int = 1) -> float | None:
        """Median GPU ms of the ``rec.timing(name)`` scope over the retired
        frames, leaving out the first ``skip`` (pipelines and caches filling)."""
        values = [scopes[name] for scopes in self.scope_ms if name in scopes]
        values = values[skip:] if len(values) > skip else values
        return statistics.median(values) if values else None

    def status_line(self, status=None) -> str:
        recent = FrameStats(self.stats.frame_s[-30:], self.stats.record_s[-30:], warmup=0)
        parts = [status()] if status else []
        parts += [f"{recent.fps:.1f} FPS", f"guest recording {recent.record_us:.0f} µs/frame"]
        return " — ".join(parts)

    def finish(self, screenshot: Path | None) -> Result:
        """Read back the last frame, write the screenshot, close everything."""
        renderer = self.renderer
        last = None
        try:
            if renderer.headless and renderer.frame_count:
                last = renderer.last_frame_rgba()
                if screenshot is not None:
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    renderer.save_png(screenshot)
            renderer.wait_idle()
        finally:
            self.close()
        scopes = {name: self.scope_median_ms(name) for frame in self.scope_ms for name in frame}
        return Result(renderer.frame_count, self.stats.fps, self.stats.record_us,
                      list(renderer.validation_messages), last, renderer.frame_timer.median_ms(), scopes)

    def close(self):
        self.renderer.wait_idle()
        self.ctx.close()
        self.renderer.close()


def report(name: str, result: Result, validation: bool, screenshot: Path | None) -> int:
    """Print the summary; the exit status is 1 if validation reported anything."""
    gpu = f", GPU {result.gpu_frame_ms:.3f} ms/frame (median)" if result.gpu_frame_ms is not None else ""
    print(f"{name}: {result.frames} frames, {result.fps:.1f} FPS, "
          f"guest recording {result.record_us:.0f} µs/frame (median, CPU){gpu}")
    if validation:
        print(f"validation messages (incl. synchronization validation): {len(result.validation_messages)}")
        for message in result.validation_messages:
            print("  " + message)
    if screenshot is not None and result.last_frame is not None:
        print(f"screenshot: {screenshot}")
    return 1 if result.validation_messages else 0


def report_checked(name: str, result: Result, args, error: float | None, what: str, limit: float = 1e-4) -> int:
    """:func:`report`, then the demo's own check against numpy: the exit
    status is 1 also when ``error`` (None: nothing was rendered) is above
    ``limit``."""
    rc = report(name, result, args.validation, args.screenshot)
    if error is not None and error > limit:
        print(f"{what} differ from numpy")
        rc = 1
    return rc


def resolve_mode(args) -> None:
    """Headless when asked, or when there is no display to open a window on."""
    if not args.headless and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        print("no display: rendering headless")
        args.headless = True
    if args.frames is None and args.headless:
        args.frames = args.default_frames_headless
    if args.screenshot is not None and not args.headless:
        raise SystemExit("--screenshot needs --headless (the window path has no readback)")
