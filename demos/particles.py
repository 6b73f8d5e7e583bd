"""Particles on a strange attractor, simulated by guestcompute inside a
Vulkan renderer's frame and drawn in the same command buffer.

Per frame, one command buffer and one submit:

    guest: advance the particles, write the host's vertex buffers   (before the pass)
    host:  draw them as additive point sprites                       (render pass)
    guest: bloom + tonemap of the rendered image itself              (after the pass)
           (or of a copy in a buffer where the image allows no storage use)
    host:  present / read back

Run ``python -m demos.particles`` or ``python demos/particles.py`` (a window; headless
without a display) or
``python -m demos.particles --headless --frames 60 --screenshot out/particles.png``.
"""
from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run as a file (python demos/particles.py) rather than as a module: import the demos
    # as the package they are, from the repository root (PEP 366).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "demos"

from .app import GuestApp, parser, report, resolve_mode
from .attractor import LorenzParticles
from .bloom import make_bloom


def run(args):
    resolve_mode(args)
    app = GuestApp(args, "guestcompute particles")
    try:
        renderer = app.renderer
        count, buffers = app.particle_buffers(args)
        sim = LorenzParticles(app.ctx, count, buffers.positions, buffers.colors, renderer.extent)

        def before_pass(cmd, frame):
            sim.extent = renderer.extent            # follows window resizes
            app.record(cmd, lambda rec: sim.record(rec, frame))

        bloom = None
        if not args.no_bloom:
            bloom = make_bloom(app.ctx, renderer, direct=args.direct, route=args.bloom_route)
            print(f"bloom: {type(bloom).__name__ if bloom else 'skipped (the render target allows neither image '}"
                  f"{'' if bloom else 'ops nor copies to buffers)'}")

        def after_pass(cmd, frame):
            nonlocal bloom
            if bloom.extent != renderer.extent:      # the window was resized
                bloom.destroy()
                bloom = make_bloom(app.ctx, renderer, direct=args.direct, route=args.bloom_route)
            bloom.record(cmd, app)

        frames = app.run(args.frames, before_pass, after_pass if bloom is not None else None,
                         status=lambda: f"{count:,} particles")
        renderer.wait_idle()
        if frames:
            # The host's position buffer holds the projection of the guest's state.
            error = abs(sim.positions.numpy() - sim.expected_positions(frames - 1)).max()
            print(f"max |position buffer - numpy| over {count:,} particles: {error:.2e}")
            if error > 1e-4:
                raise SystemExit("positions differ from numpy")
    except BaseException:
        app.close()
        raise
    return app.finish(args.screenshot)


def parse_args(argv=None):
    p = parser("demos.particles", __doc__)
    p.add_argument("--no-bloom", action="store_true", help="skip the guest post-process pass")
    p.add_argument("--bloom-route", choices=("auto", "image", "buffer"), default="auto",
                   help="post-process the rendered image itself, or a copy of it in a buffer "
                        "(default: the image where it allows storage use)")
    p.add_argument("--direct", action="store_true",
                   help="record the post-process op by op every frame instead of replaying a program")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result = run(args)
    return report("particles", result, args.validation, args.screenshot)


if __name__ == "__main__":
    sys.exit(main())
