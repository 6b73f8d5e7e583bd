"""A neural network inside the frame: an MLP colours every particle, every
frame, between the simulation step and the draw — all in the renderer's
command buffer.

The particles move on the Lorenz attractor (``demos/attractor.py``, one
user-kernel dispatch); the network is the colour field of
``demos/colour_field.py``, trained at start-up with numpy. Per frame and
particle the guest evaluates, in one ``rec.mlp`` dispatch (``ctx.mlp``)::

    (x, y, z) → tanh(· W1 + b1) → tanh(· W2 + b2) → sigmoid(· W3 + b3) → · diag(gain)
      3          32                32                 4                   4

the input scaling folded into the first layer, and the intensity gain a
last diagonal layer (a sigmoid's output cannot take it inside the sigmoid).
It reads the simulation's state tensor and writes straight into the host's
colour vertex buffer — no intermediate leaves registers and shared memory.
The weights are fp16 where the device has 16-bit storage, fp32 elsewhere.
The dispatch is recorded once as a program and replayed each frame
(``--direct`` records it every frame instead); ``--layered`` runs the same
net as three matmuls, two bias adds, three activations and a multiply, for
comparison. At exit the colours of the last frame are checked against
numpy's evaluation of the trained weights (within fp16 rounding for fp16
weights).

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

import guestcompute as gc

from .app import GuestApp, parser, report_checked, resolve_mode
from .attractor import LorenzParticles, initial_state
from .colour_field import HIDDEN, normalised_inputs, train
from .networks import kernel_tolerance, weights_dtype

# The MLP costs ~2.6 kFLOP per particle per frame: a CPU device gets fewer.
CPU_PARTICLES = 40_000


class NeuralColours:
    """The trained MLP evaluated from ``state`` (n, 4) into ``colors`` (n, 4):
    one ``rec.mlp`` dispatch, or (``layered``) three matmuls, adds and
    activations as separate ops, for comparison."""

    def __init__(self, ctx, weights, state, colors, intensity_gain: float, direct: bool = False,
                 layered: bool = False):
        weights = weights.with_normalisation_folded()
        # The net predicts intensity for a reference density; scale it to this one.
        self.gain = np.array([1.0, 1.0, 1.0, intensity_gain], np.float32)
        self.state, self.colors = state, colors
        self.dtype = "float32" if layered else weights_dtype(ctx)
        if layered:
            self.w1, self.w2, self.b2, self.w3, self.b3 = (
                ctx.tensor(a) for a in (weights.w1, weights.w2, weights.b2, weights.w3, weights.b3))
            self.gain_t = ctx.tensor(self.gain)
            self.h1 = ctx.empty((state.shape[0], HIDDEN))
            self.h2 = ctx.empty((state.shape[0], HIDDEN))
            evaluate = self._layered
        else:
            # sigmoid(v) * gain is no sigmoid of a scaled v, so the gain cannot
            # go into the last layer: it is a fourth, diagonal layer with no
            # activation, in the same dispatch (no rec.mul afterwards).
            self.net = ctx.mlp([gc.Dense(weights.w1[:3], weights.w1[3], "tanh"),   # its last row is the bias
                                gc.Dense(weights.w2, weights.b2, "tanh"),
                                gc.Dense(weights.w3, weights.b3, "sigmoid"),
                                gc.Dense(np.diag(self.gain), None, "none")], dtype=self.dtype)
            evaluate = self._fused
        self.evaluate = evaluate
        self.program = None if direct else ctx.program(evaluate)

    def record(self, rec) -> None:
        if self.program is not None:
            rec.execute(self.program)
        else:
            self.evaluate(rec)

    def _fused(self, rec) -> None:
        # (x, y, z) of the state straight into the host's vertex buffer.
        rec.mlp(self.state[:, :3], self.net, out=self.colors)

    def _layered(self, rec) -> None:
        h1, h2, colors = self.h1, self.h2, self.colors
        rec.matmul(self.state, self.w1, out=h1)
        rec.tanh(h1, out=h1)
        rec.matmul(h1, self.w2, out=h2)
        rec.add(h2, self.b2, out=h2)
        rec.tanh(h2, out=h2)
        rec.matmul(h2, self.w3, out=colors)       # into the host's vertex buffer
        rec.add(colors, self.b3, out=colors)
        rec.sigmoid(colors, out=colors)
        rec.mul(colors, self.gain_t, out=colors)

    @property
    def limit(self) -> float:
        """How far the GPU's colours may be from numpy's float64 evaluation
        of the trained float32 weights: fp16 weights are rounded (and the
        cooperative-matrix kernel rounds activations to fp16)."""
        return kernel_tolerance(self.dtype, float(self.gain.max()))


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
                            intensity_gain=sim.intensity / 0.5, direct=args.direct, layered=args.layered)

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
            want = weights.forward(normalised_inputs(sim.state.numpy()[:, :3])) * net.gain
            error = float(np.abs(sim.colors.numpy() - want).max())
            print(f"max |GPU colour - numpy| over {count:,} particles: {error:.2e} "
                  f"({'layer by layer' if args.layered else 'one rec.mlp'}, {net.dtype} weights)")
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot), error, net.limit


def parse_args(argv=None):
    p = parser("demos.neural", __doc__, cpu_particles=CPU_PARTICLES)
    p.add_argument("--direct", action="store_true",
                   help="record the MLP every frame instead of replaying a program")
    p.add_argument("--layered", action="store_true",
                   help="evaluate the MLP layer by layer (matmul, add, activation ops) instead of one rec.mlp")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result, error, limit = run(args)
    return report_checked("neural", result, args, error, "colours", limit)


if __name__ == "__main__":
    sys.exit(main())
