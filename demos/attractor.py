"""Particles on the Lorenz attractor, advanced by guestcompute ops.

State: three guest-owned tensors ``x, y, z`` (one float per particle, so
every step runs the contiguous vec4 kernels). Each frame the guest

1. integrates the Lorenz system with a few explicit Euler substeps,
       dx = σ(y − x),   dy = x(ρ − z) − y,   dz = xy − βz,
   composed from elementwise ops (sub / mul / add / scale with scalar push
   constants: no per-frame uploads);
2. projects the particles into the host's position buffer (an orbiting
   orthographic camera: the rotation angle is a scalar of the scale ops);
3. colours them by speed into the host's colour buffer.

Both host buffers are imported once with ``host_access="vertex"``: the
guest waits for the previous frame's vertex reads before writing and hands
its writes to the vertex-input stage afterwards — the host adds no barrier.
"""
from __future__ import annotations

import math

import numpy as np

SIGMA, RHO, BETA = 10.0, 28.0, 8.0 / 3.0
CENTER_Z = 25.0            # the attractor's middle height
SCREEN_SCALE = 1.0 / 31.0  # attractor units -> clip space
DT = 0.0035                # per Euler substep
SUBSTEPS = 2
ORBIT = 0.004              # camera radians per frame
# Speed (attractor units per unit time) that maps to full colour.
REFERENCE_SPEED = 120.0


def initial_state(count: int, seed: int = 7) -> np.ndarray:
    """(3, count) positions already on the attractor.

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
    points = out.reshape(3, -1)[:, :count]
    points += rng.normal(0, 0.05, points.shape)
    return points.astype(np.float32)


class LorenzParticles:
    """The simulation, recorded into the host's command buffer each frame."""

    def __init__(self, ctx, count: int, positions_buffer, colors_buffer, extent,
                 point_size: float = 1.5, intensity: float | None = None):
        self.ctx = ctx
        self.count = count
        nbytes = count * 16
        # Zero-copy views of the host's vertex buffers (vec4 per particle).
        self.positions = ctx.import_buffer(positions_buffer, (count, 4), "float32",
                                           host_access="vertex", buffer_size=nbytes)
        self.colors = ctx.import_buffer(colors_buffer, (count, 4), "float32",
                                        host_access="vertex", buffer_size=nbytes)
        self.x, self.y, self.z = (ctx.tensor(row) for row in initial_state(count))
        # Per-substep increments and scratch, allocated once: recording a
        # frame allocates nothing.
        self.dx, self.dy, self.dz, self.t0, self.t1 = (ctx.empty(count) for _ in range(5))
        self.point_size = point_size
        self.extent = extent
        if intensity is None:
            # Keep the total light roughly independent of the particle count.
            width, height = extent
            intensity = min(0.7, max(0.03, 0.5 * width * height / count))
        self.intensity = intensity

    def record(self, rec, frame: int) -> None:
        for _ in range(SUBSTEPS):
            self._step(rec, DT)
        self._project(rec, ORBIT * frame)
        self._colour(rec)

    def _step(self, rec, dt: float) -> None:
        x, y, z, dx, dy, dz = self.x, self.y, self.z, self.dx, self.dy, self.dz
        # Increments from the current state first, then apply all three.
        rec.sub(y, x, out=dx)                 # y − x
        rec.scale(dx, SIGMA * dt, out=dx)     # σ(y − x)·dt
        rec.sub(z, RHO, out=dy)               # z − ρ
        rec.mul(dy, x, out=dy)                # x(z − ρ)
        rec.add(dy, y, out=dy)                # x(z − ρ) + y  = −dy/dt
        rec.scale(dy, -dt, out=dy)
        rec.mul(x, y, out=dz)                 # xy
        rec.scale(z, BETA, out=self.t0)       # βz
        rec.sub(dz, self.t0, out=dz)          # xy − βz
        rec.scale(dz, dt, out=dz)
        rec.add(x, dx, out=x)
        rec.add(y, dy, out=y)
        rec.add(z, dz, out=z)

    def _project(self, rec, angle: float) -> None:
        width, height = self.extent
        k = SCREEN_SCALE
        aspect = width / height
        pos = self.positions
        # Horizontal: the attractor turned by `angle` about its z axis.
        rec.scale(self.x, k * math.cos(angle) / aspect, out=self.t0)
        rec.scale(self.y, k * math.sin(angle) / aspect, out=self.t1)
        rec.add(self.t0, self.t1, out=pos[:, 0])
        # Vertical: z up (clip space y points down).
        rec.sub(self.z, CENTER_Z, out=self.t0)
        rec.scale(self.t0, -k, out=pos[:, 1])
        rec.fill(pos[:, 2], 0.0)
        rec.fill(pos[:, 3], self.point_size)

    def _colour(self, rec) -> None:
        # Squared speed from the last substep's increments.
        t0, t1 = self.t0, self.t1
        rec.mul(self.dx, self.dx, out=t0)
        rec.mul(self.dy, self.dy, out=t1)
        rec.add(t0, t1, out=t0)
        rec.mul(self.dz, self.dz, out=t1)
        rec.add(t0, t1, out=t0)
        q = 1.0 / (REFERENCE_SPEED * DT) ** 2       # -> 1.0 at the reference speed
        col = self.colors
        # Slow particles deep blue, fast ones hot pink-white.
        rec.scale(t0, 0.9 * q, out=col[:, 0])
        rec.add(col[:, 0], 0.15, out=col[:, 0])
        rec.scale(t0, 0.45 * q, out=col[:, 1])
        rec.add(col[:, 1], 0.08, out=col[:, 1])
        rec.fill(col[:, 2], 0.75)
        rec.fill(col[:, 3], self.intensity)
