"""A neural network inside the frame: an MLP colours every particle, every
frame, between the simulation step and the draw — all in the renderer's
command buffer.

The particles move on the Lorenz attractor (``demos/attractor.py``, one
user-kernel dispatch); the network is the colour field of
``demos/colour_field.py``, trained at start-up with numpy. Per frame and
particle the guest evaluates

    h1 = tanh(state @ W1)              state = (x, y, z, 1); input scaling and
                                       the first bias are folded into W1
    h2 = tanh(h1 @ W2 + b2)
    colour = sigmoid(h2 @ W3 + b3) * gain     -> the host's colour vertex buffer

— three matmuls, two bias adds, three activations and a gain, recorded
once as a program and replayed each frame (``--direct`` records the ops
every frame instead). The last matmul writes straight into the host's
buffer. At exit the colours of the last frame are checked against numpy.

Run ``python -m demos.neural`` or ``python demos/neural.py`` (a window; headless without
a display).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

if not __package__:
    # Run as a file (python demos/neural.py) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "demos"

import numpy as np

from .app import GuestApp, parser, report_checked, resolve_mode
from .attractor import LorenzParticles, initial_state
from .colour_field import HIDDEN, normalised_inputs, train

# The MLP costs ~2.6 kFLOP per particle per frame: a CPU device gets fewer.
CPU_PARTICLES = 40_000


class NeuralColours:
    """The trained MLP as guest tensors, evaluated from ``state`` (n, 4)
    into ``colors`` (n, 4)."""

    def __init__(self, ctx, weights, state, colors, intensity_gain: float, direct: bool = False):
        weights = weights.with_normalisation_folded()
        self.w1, self.w2, self.b2, self.w3, self.b3 = (
            ctx.tensor(a) for a in (weights.w1, weights.w2, weights.b2, weights.w3, weights.b3))
        # The net predicts intensity for a reference density; scale it to this one.
        self.gain = ctx.tensor(np.array([1.0, 1.0, 1.0, intensity_gain], np.float32))
        count = state.shape[0]
        self.h1 = ctx.empty((count, HIDDEN))
        self.h2 = ctx.empty((count, HIDDEN))
        self.state, self.colors = state, colors
        self.program = None if direct else ctx.program(self._evaluate)

    def record(self, rec) -> None:
        if self.program is not None:
            rec.execute(self.program)
        else:
            self._evaluate(rec)

    def _evaluate(self, rec) -> None:
        h1, h2, colors = self.h1, self.h2, self.colors
        rec.matmul(self.state, self.w1, out=h1)
        rec.tanh(h1, out=h1)
        rec.matmul(h1, self.w2, out=h2)
        rec.add(h2, self.b2, out=h2)
        rec.tanh(h2, out=h2)
        rec.matmul(h2, self.w3, out=colors)       # into the host's vertex buffer
        rec.add(colors, self.b3, out=colors)
        rec.sigmoid(colors, out=colors)
        rec.mul(colors, self.gain, out=colors)


def run(args):
    resolve_mode(args)
    start = time.perf_counter()
    samples = initial_state(1024, seed=11)[:, :3]
    weights, rmse = train(normalised_inputs(samples))
    print(f"colour field: 4 → {HIDDEN} → {HIDDEN} → 4 MLP trained in {time.perf_counter() - start:.1f} s "
          f"(rms error {rmse:.3f})")

    app = GuestApp(args, "guestcompute neural colours")
    try:
        renderer = app.renderer
        count, buffers = app.particle_buffers(args)
        sim = LorenzParticles(app.ctx, count, buffers.positions, buffers.colors, renderer.extent)
        # The net's mean intensity is about 0.5; match the particle demo's level.
        net = NeuralColours(app.ctx, weights, sim.state, sim.colors,
                            intensity_gain=sim.intensity / 0.5, direct=args.direct)

        def before_pass(cmd, frame):
            sim.extent = renderer.extent            # follows window resizes

            def guest(rec):
                sim.record(rec, frame, colour=False)
                net.record(rec)
            app.record(cmd, guest)

        frames = app.run(args.frames, before_pass, status=lambda: f"{count:,} particles, MLP colours")
        renderer.wait_idle()
        error = None
        if frames:
            # The last frame coloured the particles from the state it left behind.
            want = weights.forward(normalised_inputs(sim.state.numpy()[:, :3])) * net.gain.numpy()
            error = float(np.abs(sim.colors.numpy() - want).max())
            print(f"max |GPU colour - numpy| over {count:,} particles: {error:.2e}")
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot), error


def parse_args(argv=None):
    p = parser("demos.neural", __doc__, cpu_particles=CPU_PARTICLES)
    p.add_argument("--direct", action="store_true",
                   help="record the MLP op by op every frame instead of replaying a program")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result, error = run(args)
    return report_checked("neural", result, args, error, "colours")


if __name__ == "__main__":
    sys.exit(main())
