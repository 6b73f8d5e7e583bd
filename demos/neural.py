"""A neural network inside the frame: an MLP colours every particle, every
frame, between the simulation step and the draw — all in the renderer's
command buffer.

The particles move on the Lorenz attractor (see ``demos/attractor.py``); the
network is the colour field of ``demos/colour_field.py``, trained at start-up
with numpy. Per frame and particle the guest evaluates

    inputs (n, 4) = (x, y, z, 1) normalised          4 small elementwise ops
    h1 = tanh(inputs @ W1)                           matmul + tanh
    h2 = tanh(h1 @ W2 + b2)                          matmul + add + tanh
    colours = sigmoid(h2 @ W3 + b3) * gain           matmul + add + sigmoid + mul

with the last matmul writing straight into the host's colour vertex buffer.
At exit the colours of the last frame are checked against numpy.

Run ``python -m demos.neural`` (a window; headless without a display).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .app import GuestApp, parser, report, resolve_mode
from .attractor import CENTER_Z, LorenzParticles, initial_state
from .colour_field import HIDDEN, INPUT_SCALE, normalised_inputs, train


class NeuralColours:
    """The trained MLP as guest tensors, evaluated into ``colors`` (n, 4)."""

    def __init__(self, ctx, weights, count: int, colors, intensity_gain: float):
        self.w1, self.w2, self.b2, self.w3, self.b3 = (
            ctx.tensor(a) for a in (weights.w1, weights.w2, weights.b2, weights.w3, weights.b3))
        # The net predicts intensity for a reference density; scale it to this one.
        self.gain = ctx.tensor(np.array([1.0, 1.0, 1.0, intensity_gain], np.float32))
        self.inputs = ctx.empty((count, 4))
        self.h1 = ctx.empty((count, HIDDEN))
        self.h2 = ctx.empty((count, HIDDEN))
        self.colors = colors

    def record(self, rec, x, y, z) -> None:
        inputs = self.inputs
        sx, sy, sz = (float(s) for s in INPUT_SCALE)
        rec.scale(x, sx, out=inputs[:, 0])
        rec.scale(y, sy, out=inputs[:, 1])
        rec.sub(z, CENTER_Z, out=inputs[:, 2])
        rec.scale(inputs[:, 2], sz, out=inputs[:, 2])
        rec.fill(inputs[:, 3], 1.0)                  # carries the first layer's bias
        rec.matmul(inputs, self.w1, out=self.h1)
        rec.tanh(self.h1, out=self.h1)
        rec.matmul(self.h1, self.w2, out=self.h2)
        rec.add(self.h2, self.b2, out=self.h2)
        rec.tanh(self.h2, out=self.h2)
        rec.matmul(self.h2, self.w3, out=self.colors)   # into the host's vertex buffer
        rec.add(self.colors, self.b3, out=self.colors)
        rec.sigmoid(self.colors, out=self.colors)
        rec.mul(self.colors, self.gain, out=self.colors)


def run(args):
    resolve_mode(args)
    start = time.perf_counter()
    samples = initial_state(1024, seed=11).T
    weights, rmse = train(normalised_inputs(samples))
    print(f"colour field: 4 → {HIDDEN} → {HIDDEN} → 4 MLP trained in {time.perf_counter() - start:.1f} s "
          f"(rms error {rmse:.3f})")

    app = GuestApp(args, "guestcompute neural colours")
    try:
        renderer = app.renderer
        count = app.default_particles(args.particles)
        print(f"device: {renderer.device_name}; particles: {count:,}; "
              f"{'offscreen' if renderer.headless else 'window'} {renderer.extent[0]}x{renderer.extent[1]}")
        buffers = renderer.create_vertex_buffers(count)
        sim = LorenzParticles(app.ctx, count, buffers.positions, buffers.colors, renderer.extent,
                              point_size=1.0 if count >= 500_000 else 1.5)
        # The net's mean intensity is about 0.5; match the particle demo's level.
        net = NeuralColours(app.ctx, weights, count, sim.colors, intensity_gain=sim.intensity / 0.5)

        def before_pass(cmd, frame):
            def guest(rec):
                sim.record(rec, frame, colour=False)
                net.record(rec, sim.x, sim.y, sim.z)
            app.record(cmd, guest)

        frames = app.run(args.frames, before_pass, status=lambda: f"{count:,} particles, MLP colours")
        renderer.wait_idle()
        error = None
        if frames:
            # The last frame coloured the particles from the state it left behind.
            state = np.stack([sim.x.numpy(), sim.y.numpy(), sim.z.numpy()], axis=1)
            want = weights.forward(normalised_inputs(state)) * net.gain.numpy()
            error = float(np.abs(sim.colors.numpy() - want).max())
            print(f"max |GPU colour - numpy| over {count:,} particles: {error:.2e}")
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot), error


def parse_args(argv=None):
    return parser(__doc__.splitlines()[0]).parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result, error = run(args)
    rc = report("neural", result, args.validation, args.screenshot)
    if error is not None and error > 1e-4:
        print("colours differ from numpy")
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
