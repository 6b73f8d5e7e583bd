"""Particles on the Lorenz attractor, advanced by a guestcompute user kernel.

State: one guest-owned ``(n, 4)`` float32 tensor (x, y, z, 1). Each frame
one dispatch of ``demos/kernels/lorenz.comp``

1. integrates dx = σ(y − x), dy = x(ρ − z) − y, dz = xy − βz with RK4
   substeps,
2. projects the particles into the host's position buffer (an orbiting
   orthographic camera; the angle is a push constant, so nothing is
   uploaded per frame), with each particle's nearness to the viewer in z
   for a depth sort,
3. colours them by speed into the host's colour buffer (unless the caller
   colours them itself, as the neural demo does).

Both host buffers are imported once with ``host_access="vertex"``: the
guest waits for the previous frame's vertex reads before writing and hands
its writes to the vertex-input stage afterwards; the host adds no barrier.
"""
from __future__ import annotations

import math

import numpy as np

from . import kernels

SIGMA, RHO, BETA = 10.0, 28.0, 8.0 / 3.0   # as in kernels/lorenz.comp
CENTER_Z = 25.0            # the attractor's middle height
SCREEN_SCALE = 1.0 / 31.0  # attractor units -> clip space
DT = 0.0035                # per RK4 substep
SUBSTEPS = 2
ORBIT = 0.004              # camera radians per frame
REFERENCE_SPEED = 120.0    # attractor units per unit time that map to full colour
WORKGROUP = 128
PUSH_LAYOUT = [("count", "uint"), ("substeps", "uint"), ("write_colours", "uint"), ("dt", "float"),
               ("view", "vec4"), ("look", "vec4")]


def initial_state(count: int, seed: int = 7) -> np.ndarray:
    """(count, 4) positions already on the attractor, w = 1.

    A few hundred trajectories are integrated in numpy (vectorised over the
    trajectories, not the particles) and the particles are spread along
    them with a little jitter, so the first frame shows the attractor
    instead of a cloud falling onto it.
    """
    rng = np.random.default_rng(seed)
    seeds = 512
    samples = -(-count // seeds)                    # points taken per trajectory
    p = np.stack([rng.normal(0, 8, seeds), rng.normal(0, 8, seeds), rng.normal(CENTER_Z, 8, seeds)])
    dt, skip, every = 0.005, 400, 3                 # skip the transient, then sample
    out = np.empty((3, samples, seeds), np.float64)
    for i in range(skip + samples * every):
        x, y, z = p
        p = p + dt * np.stack([SIGMA * (y - x), x * (RHO - z) - y, x * y - BETA * z])
        if i >= skip and (i - skip) % every == 0:
            out[:, (i - skip) // every] = p
    points = out.reshape(3, -1)[:, :count].T
    state = np.ones((count, 4), np.float32)
    state[:, :3] = points + rng.normal(0, 0.05, points.shape)
    return state


class LorenzParticles:
    """The simulation, recorded into the host's command buffer each frame."""

    def __init__(self, ctx, count: int, positions_buffer, colors_buffer, extent,
                 point_size: float | None = None, intensity: float | None = None, watch: bool = False):
        self.count = count
        nbytes = count * 16
        # Zero-copy views of the host's vertex buffers (a vec4 per particle).
        self.positions = ctx.import_buffer(positions_buffer, (count, 4), "float32",
                                           host_access="vertex", buffer_size=nbytes)
        self.colors = ctx.import_buffer(colors_buffer, (count, 4), "float32",
                                        host_access="vertex", buffer_size=nbytes)
        self.state = ctx.tensor(initial_state(count))
        # Compiled (or loaded) and its pipeline created now, not while recording.
        options = dict(workgroup=WORKGROUP, name="lorenz", push_layout=PUSH_LAYOUT)
        self.kernel = kernels.watched(ctx, "lorenz", **options) if watch else \
            ctx.kernel(kernels.source("lorenz"), **options)
        groups = -(-count // WORKGROUP)
        most = ctx.limits.max_workgroup_count[0]
        self.groups = (min(groups, most), -(-groups // most), 1)
        if point_size is None:
            # Bigger sprites when there are few particles, single pixels for millions.
            point_size = 2.0 if count < 100_000 else 1.5 if count < 500_000 else 1.0
        self.point_size = point_size
        self.extent = extent
        if intensity is None:
            # Keep the total light roughly independent of the particle count.
            width, height = extent
            intensity = min(0.7, max(0.03, 0.2 * width * height / count))
        self.intensity = intensity

    def view(self, frame: int) -> tuple:
        """(cos, sin, x scale, y scale) of the camera at ``frame``."""
        width, height = self.extent
        angle = ORBIT * frame
        return (math.cos(angle), math.sin(angle), SCREEN_SCALE * height / width, -SCREEN_SCALE)

    def record(self, rec, frame: int, colour: bool = True) -> None:
        """Advance one frame and write positions — and colours, unless
        ``colour`` is False (then the caller writes the colour buffer)."""
        push = {"count": self.count, "substeps": SUBSTEPS, "write_colours": int(colour), "dt": DT,
                "view": self.view(frame),
                "look": (self.point_size, self.intensity, 1.0 / REFERENCE_SPEED ** 2, CENTER_Z)}
        self.kernel(rec, self.state, self.positions, self.colors, push=push, groups=self.groups)

    def expected_positions(self, frame: int) -> np.ndarray:
        """numpy's version of the position buffer that ``record(rec, frame)``
        wrote from the current state (reads the state back: call once the
        GPU is idle)."""
        c, s, sx, sy = self.view(frame)
        p = self.state.numpy()
        out = np.empty((self.count, 4), np.float32)
        out[:, 0] = (c * p[:, 0] + s * p[:, 1]) * sx
        out[:, 1] = (p[:, 2] - CENTER_Z) * sy
        out[:, 2] = s * p[:, 0] - c * p[:, 1]       # nearness to the viewer
        out[:, 3] = self.point_size
        return out
