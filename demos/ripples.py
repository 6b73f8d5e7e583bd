"""Ripples on water: a guest simulation whose result the host *samples*.

The renderer owns a backdrop texture it draws behind the particles (see
``demos/host/backdrop.py``; it knows nothing of guestcompute). Each frame,
before the render pass, one dispatch of the user kernel
``demos/kernels/ripples.comp`` advances a damped wave equation on two
guest float32 height fields (ping-pong) and shades the surface straight
into that texture through an ``image2D`` binding. The texture is imported
once with ``layout="shader_read_only"``: the guest waits for the previous
frame's fragment reads, writes in GENERAL, and hands the texture back in
SHADER_READ_ONLY_OPTIMAL to the fragment stage — the host adds no barrier.

Drops fall at seeded pseudo-random places every few frames;
:meth:`Ripples.expected_heights` replays the same steps in numpy, so the
demo checks the GPU's field at the end.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

from . import kernels

C2 = 0.24                  # (speed * dt / dx)^2: stable below 0.5
DAMPING = 0.985
DROP_EVERY = 6             # frames between drops
DROP_RADIUS = 5.0          # cells
DROP_AMPLITUDE = 0.6
CELL = 4                   # frame pixels per cell in x and y
WORKGROUP = (16, 16)
PUSH_LAYOUT = [("width", "uint"), ("height", "uint"), ("c2", "float"), ("damping", "float"), ("drop", "vec4")]


class Ripples:
    """The simulation, its kernel and the imported backdrop texture."""

    def __init__(self, ctx, renderer, seed: int = 11, watch: bool = False):
        width, height = renderer.extent
        self.size = (max(width // CELL, 2), max(height // CELL, 2))
        backdrop = renderer.create_backdrop(*self.size, extra_usage=vk.VK_IMAGE_USAGE_STORAGE_BIT)
        self.texture = ctx.import_image(backdrop.handle, "rgba8_unorm", self.size, layout="shader_read_only",
                                        usage=backdrop.usage)
        w, h = self.size
        self.fields = [ctx.zeros((h, w)), ctx.zeros((h, w))]      # the step before, and now
        options = dict(name="ripples", push_layout=PUSH_LAYOUT)
        self.kernel = kernels.watched(ctx, "ripples", **options) if watch else \
            ctx.kernel(kernels.source("ripples"), **options)
        self.groups = (-(-w // WORKGROUP[0]), -(-h // WORKGROUP[1]), 1)
        self.seed = seed

    def drop(self, frame: int) -> tuple:
        """(x, y, radius, amplitude) of the drop falling in ``frame``; amplitude 0 if none."""
        if frame % DROP_EVERY:
            return (0.0, 0.0, 0.0, 0.0)
        rng = np.random.default_rng((self.seed, frame))
        w, h = self.size
        return (float(rng.uniform(0, w)), float(rng.uniform(0, h)), DROP_RADIUS, DROP_AMPLITUDE)

    def record(self, rec, frame: int) -> None:
        """One step: ``fields[frame % 2]`` is overwritten with the next heights."""
        before, now = self.fields[frame % 2], self.fields[(frame + 1) % 2]
        w, h = self.size
        push = {"width": w, "height": h, "c2": C2, "damping": DAMPING, "drop": self.drop(frame)}
        self.kernel(rec, now, before, self.texture, push=push, groups=self.groups)

    def heights(self, frames: int):
        """The guest field after ``frames`` steps (read back)."""
        return self.fields[(frames - 1) % 2].numpy()

    def expected_heights(self, frames: int) -> np.ndarray:
        """The same ``frames`` steps in numpy (float32, the kernel's order of operations)."""
        w, h = self.size
        fields = [np.zeros((h, w), np.float32), np.zeros((h, w), np.float32)]
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        for frame in range(frames):
            before, now = fields[frame % 2], fields[(frame + 1) % 2]
            edged = np.pad(now, 1, mode="edge")
            laplacian = ((edged[1:-1, :-2] + edged[1:-1, 2:]) + edged[:-2, 1:-1] + edged[2:, 1:-1]) - 4 * now
            step = np.float32(DAMPING) * ((2 * now - before) + np.float32(C2) * laplacian)
            dx, dy, radius, amplitude = (np.float32(v) for v in self.drop(frame))
            r2 = (x - dx) ** 2 + (y - dy) ** 2
            inside = r2 < radius * radius
            step[inside] += amplitude * (1 - r2[inside] / (radius * radius))
            fields[frame % 2] = step.astype(np.float32)
        return fields[(frames - 1) % 2]
